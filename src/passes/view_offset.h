// Byte offsets of views inside their storage root. Reshape-family views (eliminate_views) start
// at their input's first byte; a `split` whose outputs eliminate_views made views (a split along
// a leading axis of a contiguous intermediate: every dim before the axis is 1, so each part is one
// contiguous run of the input) starts at the bytes of the parts before it. Lowerings add this to
// the storage root's pointer (EmitContext::ptr); plan_memory needs nothing else (a view extends
// its root's lifetime, whatever its offset).
#pragma once
#include <string>

#include "ir/graph.h"

namespace dinoml::passes {

// True when `n` (op split) can leave its outputs as views of its input: every dim before the
// axis is the constant 1, the input's storage root is an arena intermediate and every output is
// an intermediate that is not a view yet.
bool split_can_alias(const ir::Graph& g, const ir::Node& n);

// Byte offset of `tensor` in its storage root (0 for tensors that own storage): the sum over its
// view_of chain of the offsets of split parts.
ir::IntExpr view_byte_offset(const ir::Graph& g, const std::string& tensor);

}  // namespace dinoml::passes
