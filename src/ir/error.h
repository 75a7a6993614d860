// Error types of the compiler core. Messages name the node, tensor and rule involved.
#pragma once
#include <stdexcept>
#include <string>

namespace dinoml {

// Malformed IR: bad JSON, unknown dtype, dangling tensor, invalid Dim, ...
class IrError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An op was used wrongly: arity, attribute, dtype or shape rule broken.
class OpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Toolchain / artifact writing problems.
class BuildError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace dinoml
