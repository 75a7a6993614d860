#include "cli/inspect_html.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <set>
#include <sstream>

#include "cli/cli.h"

namespace dinoml::cli {
namespace html {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kNodeW = 220, kNodeH = 40, kLineH = 13, kGapX = 34, kGapY = 46, kMargin = 24;

// Every string from the artifact is untrusted text: escape it for HTML bodies and attributes.
std::string esc(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double v, int prec = 1) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << v;
  return o.str();
}

std::string human_bytes(double b) {
  if (b >= 1048576) return num(b / 1048576, 2) + " MiB";
  if (b >= 1024) return num(b / 1024, 1) + " KiB";
  return num(b, 0) + " B";
}

std::string shorten(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 1) + "…"; }

const char* provider_color(Provider p) {
  switch (p) {
    case Provider::input: return "#e8eef7";
    case Provider::output: return "#e8eef7";
    case Provider::library: return "#8ecae6";
    case Provider::generated: return "#ffb703";
    case Provider::alias: return "#dddddd";
    case Provider::memcpy: return "#b7e4c7";
    case Provider::onednn: return "#cdb4db";
    case Provider::openblas: return "#f4978e";
    case Provider::other: return "#f1e3c8";
  }
  return "#ffffff";
}

const char* provider_label(Provider p) {
  switch (p) {
    case Provider::input: return "graph input / state";
    case Provider::output: return "graph output";
    case Provider::library: return "DinoML kernel library";
    case Provider::generated: return "generated fused kernel";
    case Provider::alias: return "alias (view, no code)";
    case Provider::memcpy: return "memcpy";
    case Provider::onednn: return "oneDNN";
    case Provider::openblas: return "OpenBLAS";
    case Provider::other: return "other";
  }
  return "?";
}

// "gemm_rcr_bias_gelu" -> "bias + gelu", "gemm_rrr_bias_fast_gelu" -> "bias + fast_gelu"; empty
// for ops without a fused epilogue (the op names fuse_gemm_epilogue produces).
std::string gemm_epilogue(const std::string& op) {
  for (const std::string base : {"gemm_rcr_", "gemm_rrr_"}) {
    if (op.rfind(base, 0) != 0) continue;
    std::vector<std::string> parts;
    std::stringstream in(op.substr(base.size()));
    for (std::string part; std::getline(in, part, '_');) {
      if (!parts.empty() && parts.back() == "fast") parts.back() += "_" + part;
      else parts.push_back(part);
    }
    std::string out;
    for (const auto& p : parts) out += (out.empty() ? "" : " + ") + p;
    return out;
  }
  return {};
}

double to_ms(const std::string& key, double v) {
  if (key.size() >= 2 && key.compare(key.size() - 2, 2, "_s") == 0) return v * 1e3;
  if (key.size() >= 3 && key.compare(key.size() - 3, 3, "_us") == 0) return v / 1000.0;
  if (key == "us") return v / 1000.0;
  if (key.size() >= 3 && key.compare(key.size() - 3, 3, "_ns") == 0) return v / 1e6;
  return v;
}

void collect_times(const json& j, const std::string& bucket,
                   std::map<std::string, std::vector<std::pair<std::string, double>>>& out) {
  if (j.is_array()) {
    for (const auto& e : j) collect_times(e, bucket, out);
    return;
  }
  if (!j.is_object()) return;
  std::string here = bucket;
  for (const char* k : {"bucket", "dims"}) {
    if (j.contains(k) && !j[k].is_array()) here = j[k].is_string() ? j[k].get<std::string>() : j[k].dump();
  }
  if (j.contains("node") && j["node"].is_string()) {
    // Prefer the median, then any other time-like field.
    static const char* const keys[] = {"median_ms", "median_us", "median_s", "time_ms", "time_us", "p50_ms",
                                       "p50_us",    "mean_ms",   "mean_us",  "ms",      "us"};
    for (const char* k : keys) {
      if (j.contains(k) && j[k].is_number()) {
        out[j["node"].get<std::string>()].emplace_back(here, to_ms(k, j[k].get<double>()));
        break;
      }
    }
  }
  for (const auto& [k, v] : j.items()) {
    if (v.is_structured()) collect_times(v, here, out);
  }
}

}  // namespace

const char* provider_name(Provider p) {
  switch (p) {
    case Provider::input: return "input";
    case Provider::output: return "output";
    case Provider::library: return "library";
    case Provider::generated: return "generated";
    case Provider::alias: return "alias";
    case Provider::memcpy: return "memcpy";
    case Provider::onednn: return "onednn";
    case Provider::openblas: return "openblas";
    case Provider::other: return "other";
  }
  return "other";
}

Provider classify_kernel(const std::string& k) {
  auto starts = [&](const char* p) { return k.rfind(p, 0) == 0; };
  auto has = [&](const char* p) { return k.find(p) != std::string::npos; };
  // Vendor providers first: their candidates may sit under a family prefix ("dml.gemm.onednn").
  if (has("onednn") || has("dnnl")) return Provider::onednn;
  if (has("openblas") || has("cblas")) return Provider::openblas;
  if (k == "alias" || starts("view")) return Provider::alias;
  if (k == "memcpy" || starts("memcpy")) return Provider::memcpy;
  if (starts("generated")) return Provider::generated;
  if (starts("dml_") || starts("dml.")) return Provider::library;
  return Provider::other;
}

std::map<std::string, std::vector<std::pair<std::string, double>>> read_node_times(const json& plan) {
  std::map<std::string, std::vector<std::pair<std::string, double>>> out;
  // src/tune/execution_plan.h: nodes[].buckets[] = {dims, timings[{candidate, median_s}], winner};
  // a node's time in a bucket is its winner's median.
  if (plan.is_object() && plan.contains("nodes") && plan["nodes"].is_array()) {
    for (const auto& n : plan["nodes"]) {
      if (!n.is_object() || !n.contains("node") || !n["node"].is_string() || !n.contains("buckets")) continue;
      for (const auto& b : n["buckets"]) {
        if (!b.is_object() || !b.contains("timings") || !b["timings"].is_array()) continue;
        const std::string winner = b.value("winner", "");
        for (const auto& t : b["timings"]) {
          if (t.is_object() && t.value("candidate", "") == winner && t.contains("median_s") && t["median_s"].is_number()) {
            const std::string label = b.contains("dims") ? b["dims"].dump() : "";
            out[n["node"].get<std::string>()].emplace_back(label + " " + winner, t["median_s"].get<double>() * 1e3);
          }
        }
      }
    }
    if (!out.empty()) return out;
  }
  collect_times(plan, "", out);  // any other shape: objects with "node" and a time field
  return out;
}

Layout layout_graph(const json& graph, const json& kernels, const json& codegen,
                    const std::map<std::string, std::vector<std::pair<std::string, double>>>& times) {
  Layout L;
  std::map<std::string, const json*> kernel_of, plan_of;
  if (kernels.is_array())
    for (const auto& k : kernels) kernel_of[k.value("node", "")] = &k;
  if (codegen.is_array())
    for (const auto& c : codegen) plan_of[c.value("node", "")] = &c;
  std::map<std::string, size_t> producer;  // tensor -> node index

  auto add_source = [&](const std::string& tensor, const char* kind) {
    DrawNode n;
    n.name = tensor;
    n.op = kind;
    n.provider = Provider::input;
    producer[tensor] = L.nodes.size();
    L.nodes.push_back(std::move(n));
  };
  for (const auto& t : graph.value("inputs", json::array())) add_source(t.get<std::string>(), "graph input");
  for (const auto& t : graph.value("states", json::array())) add_source(t.get<std::string>(), "state");

  for (const auto& jn : graph.value("nodes", json::array())) {
    DrawNode n;
    n.name = jn.value("name", "?");
    n.op = jn.value("op", "?");
    if (auto it = kernel_of.find(n.name); it != kernel_of.end()) {
      const json& k = *it->second;
      n.kernel = k.value("selected", "");
      n.reason = k.value("reason", "");
      n.provider = classify_kernel(n.kernel);
      // Profiled artifacts choose per shape bucket: show the distinct winners; the colour is the
      // provider that wins most buckets.
      if (k.contains("selected_per_bucket") && k["selected_per_bucket"].is_array() && !k["selected_per_bucket"].empty()) {
        std::vector<std::string> winners;
        std::map<Provider, int> votes;
        for (const auto& b : k["selected_per_bucket"]) {
          const std::string w = b.is_object() ? b.value("kernel", "") : "";
          if (w.empty()) continue;
          votes[classify_kernel(w)]++;
          if (std::find(winners.begin(), winners.end(), w) == winners.end()) winners.push_back(w);
        }
        if (!winners.empty()) {
          n.kernel.clear();
          for (const auto& w : winners) n.kernel += (n.kernel.empty() ? "" : " | ") + w;
          n.provider = std::max_element(votes.begin(), votes.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
        }
      }
    } else {
      n.provider = classify_kernel(n.kernel);
    }
    if (auto it = plan_of.find(n.name); it != plan_of.end() && it->second->contains("members"))
      for (const auto& m : (*it->second)["members"]) n.members.push_back(m.is_string() ? m.get<std::string>() : m.dump());
    n.epilogue = gemm_epilogue(n.op);
    // The builder names a node after the op it was traced as ("gemm_rcr_bias_16"); when the op is
    // now longer ("gemm_rcr_bias_gelu"), fuse_gemm_epilogue folded the extra steps into it.
    std::string traced = n.name;
    while (!traced.empty() && traced.find_last_of('_') != std::string::npos &&
           traced.find_first_not_of("0123456789", traced.find_last_of('_') + 1) == std::string::npos)
      traced.erase(traced.find_last_of('_'));
    n.epilogue_fused = !n.epilogue.empty() && traced != n.op && n.op.rfind(traced, 0) == 0;
    if (auto it = times.find(n.name); it != times.end()) n.times_ms = it->second;
    std::set<size_t> seen;
    for (const auto& in : jn.value("inputs", json::array())) {
      auto it = producer.find(in.get<std::string>());
      if (it != producer.end() && seen.insert(it->second).second) {
        n.preds.push_back(it->second);
        n.pred_tensors.push_back(in.get<std::string>());
      }
    }
    const size_t idx = L.nodes.size();
    for (const auto& out : jn.value("outputs", json::array())) producer[out.get<std::string>()] = idx;
    L.nodes.push_back(std::move(n));
  }
  for (const auto& t : graph.value("outputs", json::array())) {
    DrawNode n;
    n.name = t.get<std::string>();
    n.op = "graph output";
    n.provider = Provider::output;
    if (auto it = producer.find(n.name); it != producer.end()) {
      n.preds.push_back(it->second);
      n.pred_tensors.push_back(n.name);
    }
    L.nodes.push_back(std::move(n));
  }

  // Longest-path layering: nodes are in topological order, so one forward pass suffices.
  int max_layer = 0;
  for (auto& n : L.nodes) {
    for (size_t p : n.preds) n.layer = std::max(n.layer, L.nodes[p].layer + 1);
    max_layer = std::max(max_layer, n.layer);
  }
  std::vector<std::vector<size_t>> layers(max_layer + 1);
  for (size_t i = 0; i < L.nodes.size(); ++i) layers[L.nodes[i].layer].push_back(i);
  std::vector<std::vector<size_t>> succs(L.nodes.size());
  for (size_t i = 0; i < L.nodes.size(); ++i)
    for (size_t p : L.nodes[i].preds) succs[p].push_back(i);

  // Barycentre ordering: a node's key is the mean centred position of its neighbours in the
  // adjacent direction; alternating down/up sweeps reduce crossings (Sugiyama's heuristic).
  std::vector<double> pos(L.nodes.size());
  auto place = [&]() {
    for (auto& layer : layers)
      for (size_t k = 0; k < layer.size(); ++k) pos[layer[k]] = k - (layer.size() - 1) / 2.0;
  };
  place();
  for (int sweep = 0; sweep < 8; ++sweep) {
    const bool down = sweep % 2 == 0;
    for (int li = down ? 1 : max_layer - 1; down ? li <= max_layer : li >= 0; li += down ? 1 : -1) {
      auto& layer = layers[li];
      std::vector<std::pair<double, size_t>> keyed;
      for (size_t k = 0; k < layer.size(); ++k) {
        const auto& nb = down ? L.nodes[layer[k]].preds : succs[layer[k]];
        double key = pos[layer[k]];
        if (!nb.empty()) key = std::accumulate(nb.begin(), nb.end(), 0.0, [&](double s, size_t j) { return s + pos[j]; }) / nb.size();
        keyed.emplace_back(key, layer[k]);
      }
      std::stable_sort(keyed.begin(), keyed.end(), [](auto& a, auto& b) { return a.first < b.first; });
      for (size_t k = 0; k < layer.size(); ++k) layer[k] = keyed[k].second;
      for (size_t k = 0; k < layer.size(); ++k) pos[layer[k]] = k - (layer.size() - 1) / 2.0;
    }
  }

  // Coordinates: layers are rows; a row is as tall as its tallest box (fused nodes list members).
  size_t widest = 1;
  for (const auto& layer : layers) widest = std::max(widest, layer.size());
  L.width = 2 * kMargin + widest * kNodeW + (widest - 1) * kGapX;
  double y = kMargin;
  for (const auto& layer : layers) {
    double row_h = 0;
    for (size_t i : layer) {
      auto& n = L.nodes[i];
      const size_t lines = std::min<size_t>(n.members.size(), 6) + (n.members.size() > 6) + (!n.epilogue.empty()) +
                           (!n.times_ms.empty()) + (!n.kernel.empty());
      n.w = kNodeW;
      n.h = kNodeH + lines * kLineH;
      row_h = std::max(row_h, n.h);
    }
    const double row_w = layer.size() * kNodeW + (layer.size() - 1) * kGapX;
    double x = (L.width - row_w) / 2;
    for (size_t i : layer) {
      L.nodes[i].x = x;
      L.nodes[i].y = y;
      x += kNodeW + kGapX;
    }
    y += row_h + kGapY;
  }
  L.height = y - kGapY + kMargin;
  return L;
}

namespace {

std::string graph_svg(const Layout& L) {
  std::ostringstream s;
  s << "<svg id=\"graph\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(L.width, 0) << "\" height=\""
    << num(L.height, 0) << "\" viewBox=\"0 0 " << num(L.width, 0) << " " << num(L.height, 0) << "\">\n"
    << "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
       "orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#667\"/></marker></defs>\n";
  for (const auto& n : L.nodes) {
    for (size_t k = 0; k < n.preds.size(); ++k) {
      const auto& p = L.nodes[n.preds[k]];
      const double x1 = p.x + p.w / 2, y1 = p.y + p.h, x2 = n.x + n.w / 2, y2 = n.y - 2, my = (y1 + y2) / 2;
      s << "<path class=\"edge\" d=\"M" << num(x1) << "," << num(y1) << " C" << num(x1) << "," << num(my) << " "
        << num(x2) << "," << num(my) << " " << num(x2) << "," << num(y2) << "\" marker-end=\"url(#arrow)\"><title>"
        << esc(n.pred_tensors[k]) << "</title></path>\n";
    }
  }
  for (const auto& n : L.nodes) {
    const bool fused = !n.members.empty() && n.op == "fused_elementwise";
    const bool boxed = fused || n.epilogue_fused;
    std::string tip = n.name + " (" + n.op + ")";
    if (!n.kernel.empty()) tip += "\nkernel: " + n.kernel;
    if (!n.reason.empty()) tip += "\nwhy: " + n.reason;
    for (const auto& [b, ms] : n.times_ms) tip += "\ntime " + (b.empty() ? std::string() : b + ": ") + num(ms, 4) + " ms";
    s << "<g class=\"node\" data-name=\"" << esc(n.name) << "\" data-provider=\"" << provider_name(n.provider) << "\">"
      << "<title>" << esc(tip) << "</title>";
    if (boxed) {  // the fused group's box, drawn around the node
      s << "<rect class=\"group\" x=\"" << num(n.x - 5) << "\" y=\"" << num(n.y - 5) << "\" width=\"" << num(n.w + 10)
        << "\" height=\"" << num(n.h + 10) << "\" rx=\"9\"/>";
    }
    s << "<rect x=\"" << num(n.x) << "\" y=\"" << num(n.y) << "\" width=\"" << num(n.w) << "\" height=\"" << num(n.h)
      << "\" rx=\"6\" fill=\"" << provider_color(n.provider) << "\"/>";
    double ty = n.y + 17;
    s << "<text class=\"nm\" x=\"" << num(n.x + 8) << "\" y=\"" << num(ty) << "\">" << esc(shorten(n.name, 30)) << "</text>";
    ty += 15;
    s << "<text class=\"sub\" x=\"" << num(n.x + 8) << "\" y=\"" << num(ty) << "\">" << esc(shorten(n.op, 36)) << "</text>";
    if (!n.kernel.empty()) {
      ty += kLineH;
      s << "<text class=\"sub\" x=\"" << num(n.x + 8) << "\" y=\"" << num(ty) << "\">→ " << esc(shorten(n.kernel, 32))
        << "</text>";
    }
    if (!n.epilogue.empty()) {
      ty += kLineH;
      s << "<text class=\"fz\" x=\"" << num(n.x + 8) << "\" y=\"" << num(ty) << "\">"
        << (n.epilogue_fused ? "epilogue fused: " : "epilogue: ") << esc(shorten(n.epilogue, 24)) << "</text>";
    }
    if (fused) {
      for (size_t m = 0; m < n.members.size() && m < 6; ++m) {
        ty += kLineH;
        s << "<text class=\"fz\" x=\"" << num(n.x + 14) << "\" y=\"" << num(ty) << "\">• " << esc(shorten(n.members[m], 32))
          << "</text>";
      }
      if (n.members.size() > 6) {
        ty += kLineH;
        s << "<text class=\"fz\" x=\"" << num(n.x + 14) << "\" y=\"" << num(ty) << "\">+ " << n.members.size() - 6
          << " more</text>";
      }
    }
    if (!n.times_ms.empty()) {
      ty += kLineH;
      s << "<text class=\"tm\" x=\"" << num(n.x + 8) << "\" y=\"" << num(ty) << "\">" << num(n.times_ms.front().second, 4)
        << " ms" << (n.times_ms.size() > 1 ? " (first bucket)" : "") << "</text>";
    }
    s << "</g>\n";
  }
  s << "</svg>\n";
  return s.str();
}

// One <g> per bucket: x = node index (lifetime first..last), y = arena offset; one rect per buffer.
std::string memory_svg(const json& plan, const json& graph, std::ostringstream& selector) {
  const auto buckets = plan.value("buckets", json::array());
  const double W = 1100, H = 360, left = 90, top = 16, bottom = 40;
  const size_t n_nodes = std::max<size_t>(1, graph.value("nodes", json::array()).size());
  std::vector<std::string> node_names;
  for (const auto& n : graph.value("nodes", json::array())) node_names.push_back(n.value("name", "?"));
  std::ostringstream s;
  s << "<svg id=\"memory\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(left + W + 20, 0) << "\" height=\""
    << num(top + H + bottom, 0) << "\">\n";
  const double sx = W / n_nodes;
  // x axis: node indices (labels thinned to about 20).
  s << "<line class=\"axis\" x1=\"" << left << "\" y1=\"" << top + H << "\" x2=\"" << left + W << "\" y2=\"" << top + H << "\"/>";
  const size_t step = std::max<size_t>(1, n_nodes / 20);
  for (size_t i = 0; i < n_nodes; i += step) {
    s << "<text class=\"tick\" x=\"" << num(left + (i + 0.5) * sx) << "\" y=\"" << top + H + 14 << "\">" << i;
    if (i < node_names.size()) s << "<title>" << esc(node_names[i]) << "</title>";
    s << "</text>";
  }
  s << "<text class=\"lbl\" x=\"" << left + W / 2 << "\" y=\"" << top + H + 32 << "\">node index (lifetime)</text>";
  s << "<text class=\"lbl\" transform=\"translate(14," << top + H / 2 << ") rotate(-90)\">arena offset</text>\n";
  for (size_t b = 0; b < buckets.size(); ++b) {
    const auto& bucket = buckets[b];
    const double arena = std::max<double>(1, bucket.value("arena_bytes", 0.0));
    const std::string dims = bucket.contains("dims") ? bucket["dims"].dump() : "{}";
    selector << "<option value=\"" << b << "\">" << esc(dims) << " — arena " << human_bytes(arena) << ", "
             << bucket.value("allocations", json::array()).size() << " buffers</option>";
    s << "<g class=\"bucket\" id=\"bucket-" << b << "\"" << (b ? " style=\"display:none\"" : "") << ">";
    for (int t = 0; t <= 4; ++t) {
      const double yy = top + H * t / 4;
      s << "<line class=\"grid\" x1=\"" << left << "\" y1=\"" << num(yy) << "\" x2=\"" << left + W << "\" y2=\""
        << num(yy) << "\"/><text class=\"ytick\" x=\"" << left - 6 << "\" y=\"" << num(yy + 4) << "\">"
        << human_bytes(arena * t / 4) << "</text>";
    }
    size_t k = 0;
    for (const auto& a : bucket.value("allocations", json::array())) {
      const double first = a.value("first", 0.0), last = a.value("last", first), off = a.value("offset", 0.0),
                   nb = a.value("nbytes", 0.0);
      const int hue = static_cast<int>((std::hash<std::string>{}(a.value("tensor", "")) % 360));
      s << "<rect class=\"alloc\" x=\"" << num(left + first * sx) << "\" y=\"" << num(top + off / arena * H)
        << "\" width=\"" << num(std::max(2.0, (last - first + 1) * sx - 1)) << "\" height=\""
        << num(std::max(1.5, nb / arena * H)) << "\" fill=\"hsl(" << hue << ",60%,62%)\"><title>"
        << esc(a.value("tensor", "?")) << "\noffset " << num(off, 0) << ", " << num(nb, 0) << " bytes\nlives nodes "
        << num(first, 0) << "–" << num(last, 0) << "</title></rect>";
      ++k;
    }
    s << "</g>\n";
  }
  s << "</svg>\n";
  return s.str();
}

json read_optional(const fs::path& p, json fallback) {
  if (!fs::exists(p)) return fallback;
  return read_json_file(p.string());
}

const char* const kStyle = R"CSS(
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:18px;color:#222;background:#fafafa}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:22px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#555} .meta code{background:#eee;padding:0 3px;border-radius:3px}
.legend span{display:inline-block;margin:0 12px 4px 0} .legend i{display:inline-block;width:13px;height:13px;
border:1px solid #889;border-radius:3px;vertical-align:-2px;margin-right:4px}
.scroll{overflow:auto;max-height:900px;border:1px solid #ddd;background:#fff}
svg text{font:11px system-ui,sans-serif;fill:#222} svg .nm{font-weight:600;font-size:12px} svg .sub{fill:#333}
svg .fz{fill:#7a4b00;font-style:italic} svg .tm{fill:#a00;font-weight:600}
svg .edge{fill:none;stroke:#778;stroke-width:1.3} svg .node rect{stroke:#556;stroke-width:1}
svg .node rect.group{fill:none;stroke:#c77d00;stroke-width:1.6;stroke-dasharray:5 3}
svg .node:hover rect{stroke-width:2.4} svg .axis{stroke:#444} svg .grid{stroke:#eee}
svg .tick{text-anchor:middle;fill:#555} svg .ytick{text-anchor:end;fill:#555} svg .lbl{text-anchor:middle;fill:#333}
svg .alloc{stroke:#333;stroke-width:.5}
table{border-collapse:collapse;background:#fff} td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;
vertical-align:top} th{background:#f0f0f0}
)CSS";

const char* const kScript = R"JS(
function showBucket(v){document.querySelectorAll('#memory .bucket').forEach(function(g){
g.style.display=(g.id==='bucket-'+v)?'':'none';});}
)JS";

}  // namespace

std::string render_page(const std::string& artifact_dir) {
  const fs::path dir(artifact_dir);
  if (!fs::exists(dir / "manifest.json"))
    throw std::runtime_error("'" + artifact_dir + "' is not an artifact directory (no manifest.json)");
  const json manifest = read_json_file((dir / "manifest.json").string());
  const json meta = read_json_file((dir / "metadata.json").string());
  const json graph = read_json_file((dir / "graph.dinoir.json").string());
  const json kernels = read_optional(dir / "kernel_manifest.json", json::array());
  const json codegen = read_optional(dir / "kernel_codegen_plan.json", json::array());
  const bool profiled = fs::exists(dir / "execution_plan.json");
  const auto times = profiled ? read_node_times(read_json_file((dir / "execution_plan.json").string()))
                              : std::map<std::string, std::vector<std::pair<std::string, double>>>{};
  const Layout L = layout_graph(graph, kernels, codegen, times);

  std::map<Provider, size_t> counts;
  for (const auto& n : L.nodes) counts[n.provider]++;

  std::ostringstream h;
  const std::string name = manifest.value("name", "?");
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
       "script-src 'unsafe-inline'; img-src data:\">"
    << "<title>DinoML artifact " << esc(name) << "</title><style>" << kStyle << "</style><script>" << kScript
    << "</script></head><body>\n";
  h << "<h1>DinoML artifact <code>" << esc(name) << "</code></h1>\n<div class=\"meta\">target <code>"
    << esc(manifest.value("target", "?")) << "</code> / <code>" << esc(manifest.value("arch", "?"))
    << "</code>, requires ISA <code>" << esc(manifest.value("required_isa", json::array()).dump()) << "</code>, graph hash <code>"
    << esc(manifest.value("graph_hash", "?").substr(0, 16)) << "…</code>, " << graph.value("nodes", json::array()).size()
    << " nodes, constants " << human_bytes(meta.value("constants_bytes", 0.0)) << ". "
    << (profiled ? "Per-node times from execution_plan.json." : "Not profiled (no execution_plan.json): no per-node times.")
    << "</div>\n";

  h << "<h2>Signature</h2><table><tr><th>kind</th><th>name</th><th>dtype</th><th>shape</th></tr>";
  for (const char* kind : {"inputs", "outputs", "states"})
    for (const auto& t : meta.value(kind, json::array()))
      h << "<tr><td>" << kind << "</td><td>" << esc(t.value("name", "?")) << "</td><td>" << esc(t.value("dtype", "?"))
        << "</td><td>" << esc(t.value("shape", json::array()).dump()) << "</td></tr>";
  h << "</table>\n";
  h << "<p class=\"meta\">dims: ";
  for (const auto& d : meta.value("dims", json::array()))
    h << "<code>" << esc(d.value("name", "?")) << " ∈ [" << d.value("min", 0) << ", " << d.value("max", 0) << "] buckets "
      << esc(d.value("buckets", json::array()).dump()) << "</code> ";
  h << "</p>\n";

  h << "<h2>Graph</h2><div class=\"legend\">";
  for (Provider p : {Provider::input, Provider::library, Provider::generated, Provider::alias, Provider::memcpy,
                     Provider::onednn, Provider::openblas, Provider::other, Provider::output}) {
    h << "<span><i style=\"background:" << provider_color(p) << "\"></i>" << provider_label(p) << " ("
      << counts[p] << ")</span>";
  }
  h << "<span><i style=\"border:2px dashed #c77d00\"></i>fused group</span></div>\n<div class=\"scroll\">"
    << graph_svg(L) << "</div>\n";

  h << "<h2>Memory plan</h2>";
  const json plan = meta.value("memory_plan", json::object());
  std::ostringstream selector;
  const std::string mem = memory_svg(plan, graph, selector);
  h << "<p class=\"meta\">Each rectangle is one buffer of the arena: x = the nodes it lives across, y = its offset. "
       "Alignment " << plan.value("alignment", 64) << " B; intermediates without reuse would need "
    << human_bytes(plan.value("sum_intermediate_bytes", 0.0)) << ".</p>"
    << "<label>bucket <select id=\"bucket\" onchange=\"showBucket(this.value)\">" << selector.str()
    << "</select></label><div class=\"scroll\">" << mem << "</div>\n";

  h << "<h2>Nodes and kernels</h2><table><tr><th>#</th><th>node</th><th>op</th><th>provider</th><th>kernel</th>"
       "<th>why</th><th>fused members</th><th>time (ms)</th></tr>";
  size_t idx = 0;
  for (const auto& n : L.nodes) {
    if (n.provider == Provider::input || n.provider == Provider::output) continue;
    std::string members;
    for (const auto& m : n.members) members += (members.empty() ? "" : ", ") + m;
    if (!n.epilogue.empty()) members = (n.epilogue_fused ? "epilogue fused: " : "epilogue: ") + n.epilogue;
    std::string t;
    for (const auto& [b, ms] : n.times_ms) t += (t.empty() ? "" : "; ") + (b.empty() ? "" : b + ": ") + num(ms, 4);
    h << "<tr><td>" << idx++ << "</td><td>" << esc(n.name) << "</td><td>" << esc(n.op) << "</td><td>"
      << provider_label(n.provider) << "</td><td>" << esc(n.kernel) << "</td><td>" << esc(n.reason) << "</td><td>"
      << esc(members) << "</td><td>" << esc(t.empty() ? "—" : t) << "</td></tr>";
  }
  h << "</table>\n<p class=\"meta\">Written by <code>dinoml inspect --html</code> from the artifact's JSON files; no code "
       "of the artifact was loaded.</p></body></html>\n";
  return h.str();
}

}  // namespace html

int cmd_inspect_html(const std::string& artifact, const std::string& out_html) {
  const std::string page = html::render_page(artifact);
  std::ofstream f(out_html, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error("cannot write '" + out_html + "'");
  f << page;
  if (!f) throw std::runtime_error("error while writing '" + out_html + "'");
  std::cout << "wrote " << out_html << " (" << page.size() / 1024 << " KiB)\n";
  return 0;
}

}  // namespace dinoml::cli
