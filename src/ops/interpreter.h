// The reference interpreter: runs a whole graph with each op's reference implementation.
// It is the oracle for constant folding, `dinoml validate` and the compiler's own tests.
#pragma once
#include <map>
#include <string>

#include "ir/graph.h"
#include "ops/host_tensor.h"

namespace dinoml::ops {

struct InterpretResult {
  std::map<std::string, HostTensor> outputs;  // by graph output name
  std::map<std::string, HostTensor> states;   // state values after the run
};

// `inputs` by graph input name; dims are derived from input shapes and checked against bounds.
// `states` (optional) gives state values before the run (zeros when absent).
InterpretResult interpret(const ir::Graph& g, const std::map<std::string, HostTensor>& inputs,
                          const std::map<std::string, HostTensor>& states = {});

// Runs the graphs of a tensor-parallel group (one per rank, same nodes, each with its own
// constants) in lockstep on the same inputs; collective nodes combine the ranks' tensors
// (collective.h). `states` is empty or one set per rank. Returns each rank's outputs and states.
std::vector<InterpretResult> interpret_group(const std::vector<const ir::Graph*>& ranks,
                                             const std::map<std::string, HostTensor>& inputs,
                                             const std::vector<std::map<std::string, HostTensor>>& states = {});

// Evaluates every tensor; used by constant folding for a single node.
std::vector<HostTensor> run_node(const ir::Node& node, const std::vector<const HostTensor*>& inputs,
                                 const ir::Graph& g, const std::map<std::string, int64_t>& dims);

HostTensor constant_tensor(const ir::Graph& g, const std::string& name);

}  // namespace dinoml::ops
