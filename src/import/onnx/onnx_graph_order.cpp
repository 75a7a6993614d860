// Graph preparation before conversion: nodes in topological order. ONNX requires the node list
// of a graph to be sorted, but exporters and graph editors write graphs that are not (ONNX Runtime
// sorts them on load); the importer sorts every graph, subgraphs included, the same way.
#include <queue>
#include <set>

#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {

void free_reads(const onnx::GraphProto& g, std::set<std::string>& out) {
  std::set<std::string> defined;
  for (const auto& i : g.input()) defined.insert(i.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) defined.insert(o);
  for (const auto& n : g.node()) {
    for (const auto& i : n.input())
      if (!i.empty() && !defined.count(i)) out.insert(i);
    std::set<std::string> sub;
    for (const auto& a : n.attribute()) {
      if (a.has_g()) free_reads(a.g(), sub);
      for (const auto& sg : a.graphs()) free_reads(sg, sub);
    }
    for (const auto& s : sub)
      if (!defined.count(s)) out.insert(s);
  }
}

namespace {

std::string node_label(const onnx::NodeProto& n, size_t idx) {
  return "'" + (n.name().empty() ? "#" + std::to_string(idx) + " " + n.op_type() : n.name()) + "' (" + n.op_type() + ")";
}

}  // namespace

void sort_nodes(onnx::GraphProto& g, const std::string& where) {
  // Subgraphs first: their order does not depend on the enclosing graph's.
  for (auto& n : *g.mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) sort_nodes(*a.mutable_g(), where + " > " + n.op_type() + " body");
      for (auto& sg : *a.mutable_graphs()) sort_nodes(sg, where + " > " + n.op_type() + " body");
    }
  const size_t n = static_cast<size_t>(g.node_size());
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < n; ++i)
    for (const auto& o : g.node(static_cast<int>(i)).output())
      if (!o.empty()) producer.emplace(o, i);
  // deps[i]: nodes whose outputs node i reads (directly, or inside its If / Loop / Scan bodies).
  std::vector<std::set<size_t>> deps(n);
  std::vector<std::vector<size_t>> users(n);
  bool sorted = true;
  for (size_t i = 0; i < n; ++i) {
    const auto& node = g.node(static_cast<int>(i));
    std::set<std::string> reads(node.input().begin(), node.input().end());
    for (const auto& a : node.attribute()) {
      if (a.has_g()) free_reads(a.g(), reads);
      for (const auto& sg : a.graphs()) free_reads(sg, reads);
    }
    for (const auto& r : reads) {
      auto it = producer.find(r);
      if (r.empty() || it == producer.end() || it->second == i) continue;
      if (deps[i].insert(it->second).second) users[it->second].push_back(i);
      if (it->second > i) sorted = false;
    }
  }
  if (sorted) return;
  // Kahn's algorithm, always taking the ready node that comes first in the file, so a sorted part
  // keeps its order.
  std::vector<size_t> pending(n);
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < n; ++i)
    if ((pending[i] = deps[i].size()) == 0) ready.push(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t u : users[i])
      if (--pending[u] == 0) ready.push(u);
  }
  if (order.size() != n) {
    std::string names;
    size_t listed = 0;
    for (size_t i = 0; i < n; ++i)
      if (pending[i] > 0 && listed++ < 6) names += (names.empty() ? "" : ", ") + node_label(g.node(static_cast<int>(i)), i);
    if (listed > 6) names += ", ... (" + std::to_string(listed) + " nodes)";
    throw OnnxImportError("ONNX model is not a DAG: in " + where + ", nodes " + names +
                              " depend on each other's outputs (a cycle); an ONNX graph must be acyclic (loops are "
                              "written as Loop / Scan nodes): fix or re-export the model",
                          {{"", "", "the " + where + " has a cycle through " + names, false}});
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> sorted_nodes;
  for (size_t i : order) *sorted_nodes.Add() = std::move(*g.mutable_node(static_cast<int>(i)));
  g.mutable_node()->Swap(&sorted_nodes);
}

}  // namespace dinoml::onnx_import
