// Collective ops (all_reduce, all_gather) of tensor-parallel graphs: their cross-rank reference.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/host_tensor.h"

namespace dinoml::ops {

bool is_collective(const std::string& op);
// The result of collective `node` on every rank, given each rank's input (per_rank[r]).
std::vector<HostTensor> collective_reference(const ir::Node& node, const std::vector<const HostTensor*>& per_rank);

}  // namespace dinoml::ops
