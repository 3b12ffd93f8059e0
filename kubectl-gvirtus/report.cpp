#include "kubectl-gvirtus/report.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "common/contract/labels.h"
#include "common/time/time_text.h"

namespace gvirtus::kubectl_gvirtus {
namespace {

using nlohmann::json;

std::string gib(int64_t mib) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(mib) / 1024.0);
  return text;
}

std::string sessions(const BackendView& b) {
  if (!b.load) {
    return "-";
  }
  return std::to_string(b.load->connections) + "/" +
         (b.load->maxSessions > 0 ? std::to_string(b.load->maxSessions) : "-");
}

std::string gpus(const BackendView& b) {
  return b.load ? std::to_string(b.load->gpus.size()) : "-";
}

std::string gpuMemory(const BackendView& b) {
  if (!b.load || b.load->gpus.empty()) {
    return "-";
  }
  int64_t used = 0;
  int64_t total = 0;
  for (const auto& gpu : b.load->gpus) {
    used += gpu.memoryUsedMiB;
    total += gpu.memoryTotalMiB;
  }
  return gib(used) + "/" + gib(total) + "Gi";
}

std::string heldMemory(const BackendView& b) {
  return b.load && !b.load->gpus.empty() ? gib(b.heldMiB) + "Gi" : "-";
}

std::string utilization(const BackendView& b) {
  if (!b.load || b.load->gpus.empty()) {
    return "-";
  }
  int64_t top = 0;
  for (const auto& gpu : b.load->gpus) {
    top = std::max(top, gpu.utilization);
  }
  return std::to_string(top) + "%";
}

std::string loadAge(const BackendView& b) {
  if (!b.loadError.empty()) {
    return "unreadable";
  }
  return b.loadAge ? formatAge(*b.loadAge) : "none";
}

std::string rfc3339(std::optional<TimePoint> t) {
  return t ? formatRfc3339(*t) : "";
}

json toJson(const EventView& ev) {
  return {{"type", ev.type},     {"reason", ev.reason}, {"message", ev.message},
          {"source", ev.source}, {"count", ev.count},   {"lastSeen", rfc3339(ev.last)}};
}

}  // namespace

std::string formatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) {
        line += std::string(widths[i] - row[i].size() + 3, ' ');
      }
    }
    out += line + "\n";
  }
  return out;
}

std::string backendsTable(const std::vector<BackendView>& backends) {
  if (backends.empty()) {
    return "No GVirtuS backends.\n";
  }
  std::vector<std::vector<std::string>> rows{{"NAME", "NODE", "ENDPOINT", "READY", "SESSIONS",
                                              "PODS", "GPUS", "GPU MEMORY", "GPU HELD", "GPU UTIL",
                                              "LOAD AGE"}};
  for (const auto& b : backends) {
    rows.push_back({b.name, b.node.empty() ? "<none>" : b.node,
                    b.endpoint.empty() ? "<none>" : b.endpoint, b.ready ? "yes" : "no", sessions(b),
                    std::to_string(b.pods), gpus(b), gpuMemory(b), heldMemory(b), utilization(b),
                    loadAge(b)});
  }
  return formatTable(rows);
}

std::string waitingTable(const std::vector<WaitingView>& waiting) {
  if (waiting.empty()) {
    return "No pods wait for a backend.\n";
  }
  std::vector<std::vector<std::string>> rows{
      {"NAMESPACE", "POD", "WAITING", "REASON SEEN", "REASON"}};
  for (const auto& w : waiting) {
    rows.push_back({w.ns, w.name, formatAge(w.age),
                    w.reasonAge ? formatAge(*w.reasonAge) + " ago" : "-", w.reason});
  }
  return formatTable(rows);
}

std::string lostTable(const std::vector<LostView>& lost, TimePoint now, size_t rows) {
  if (lost.empty()) {
    return "No pod has lost its backend.\n";
  }
  std::vector<std::vector<std::string>> table{
      {"NAMESPACE", "POD", "BACKEND POD", "PROBLEM", "WHAT IS WRONG", "DONE"}};
  for (size_t i = 0; i < lost.size() && i < rows; ++i) {
    const LostView& l = lost[i];
    table.push_back({l.ns, l.name + (l.deleting ? " (deleting)" : ""), l.backendPod,
                     problemName(l.problem), l.detail, actionText(l, now)});
  }
  std::string out = formatTable(table);
  if (lost.size() > rows) {
    out += "... and " + std::to_string(lost.size() - rows) + " more (-o json lists them all)\n";
  }
  return out;
}

std::string taintedTable(const std::vector<TaintedView>& tainted) {
  std::vector<std::vector<std::string>> table{
      {"BACKEND POD", "DEVICE TAINT RULE", "TAINT", "AGE", "EVICTION"}};
  for (const TaintedView& t : tainted) {
    table.push_back({t.backendPod, t.rule, t.taint, t.age ? formatAge(*t.age) : "-", t.eviction});
  }
  return formatTable(table);
}

std::string statusText(const std::vector<BackendView>& backends,
                       const std::vector<WaitingView>& waiting, const std::vector<LostView>& lost,
                       const std::vector<TaintedView>& tainted, TimePoint now) {
  const auto ready =
      std::count_if(backends.begin(), backends.end(), [](const BackendView& b) { return b.ready; });
  int64_t used = 0;
  int64_t capacity = 0;
  for (const auto& b : backends) {
    if (b.ready && b.load) {
      used += b.load->connections;
      capacity += b.load->maxSessions;
    }
  }
  std::string out = "Backends: " + std::to_string(ready) + " ready of " +
                    std::to_string(backends.size()) + ", sessions " + std::to_string(used) + "/" +
                    std::to_string(capacity) + "; pods waiting: " + std::to_string(waiting.size()) +
                    "; pods with a lost backend: " + std::to_string(lost.size()) + "\n\n";
  out += backendsTable(backends);
  out += "\n";
  out += waitingTable(waiting);
  if (!lost.empty()) {
    out += "\n";
    out += lostTable(lost, now);
  }
  if (!tainted.empty()) {
    out +=
        "\nLost backends whose devices are tainted: kube-controller-manager evicts the pods "
        "whose claims do not tolerate the taint\n";
    out += taintedTable(tainted);
  }
  return out;
}

std::string explanationText(const PodExplanation& e, TimePoint now) {
  std::string out = "Pod " + e.ns + "/" + e.name + " " + e.summary + ".\n";
  std::vector<std::vector<std::string>> facts;
  facts.push_back({"Phase:", e.phase.empty() ? "<unknown>" : e.phase});
  facts.push_back({"Node:", e.node.empty() ? "<none>" : e.node});
  if (!e.backend.empty()) {
    facts.push_back({"Backend:", e.backend});
  }
  if (!e.backendPod.empty()) {
    facts.push_back({"Backend pod:", e.backendPod});
  }
  if (e.backendView && e.backendView->load) {
    facts.push_back({"Backend load:", "sessions " + sessions(*e.backendView) + ", GPUs " +
                                          gpus(*e.backendView) + ", GPU memory " +
                                          gpuMemory(*e.backendView)});
  }
  if (e.lost) {
    facts.push_back(
        {"Backend lost:", std::string(problemName(e.lost->problem)) + ": " + e.lost->detail});
    if (!e.lost->condition.empty()) {
      facts.push_back({"Condition:",
                       std::string(names::kBackendLostCondition) + "=True, " + e.lost->condition});
    }
    facts.push_back({"Done:", actionText(*e.lost, now)});
  }
  out += formatTable(facts);
  if (!e.events.empty()) {
    out += "\nEvents:\n";
    std::vector<std::vector<std::string>> rows{
        {"  LAST SEEN", "TYPE", "REASON", "FROM", "MESSAGE"}};
    for (const auto& ev : e.events) {
      rows.push_back({"  " + rfc3339(ev.last), ev.type, ev.reason, ev.source,
                      ev.message + (ev.count > 1 ? " (x" + std::to_string(ev.count) + ")" : "")});
    }
    out += formatTable(rows);
  }
  return out;
}

json toJson(const BackendView& b) {
  json out = {{"namespace", b.ns},
              {"name", b.name},
              {"node", b.node},
              {"endpoint", b.endpoint},
              {"ready", b.ready},
              {"pods", b.pods},
              {"gpuMemoryHeldMiB", b.heldMiB}};
  if (b.load) {
    json gpuList = json::array();
    for (const auto& gpu : b.load->gpus) {
      gpuList.push_back({{"index", gpu.index},
                         {"memoryTotalMiB", gpu.memoryTotalMiB},
                         {"memoryUsedMiB", gpu.memoryUsedMiB},
                         {"utilization", gpu.utilization}});
    }
    out["load"] = {{"connections", b.load->connections},
                   {"maxSessions", b.load->maxSessions},
                   {"gpus", gpuList},
                   {"updated", rfc3339(b.load->updated)}};
  } else {
    out["load"] = nullptr;
  }
  if (b.loadAge) {
    out["loadAgeSeconds"] = b.loadAge->count();
  }
  if (!b.loadError.empty()) {
    out["loadError"] = b.loadError;
  }
  return out;
}

json toJson(const WaitingView& w) {
  json out = {{"namespace", w.ns},
              {"name", w.name},
              {"waitingSeconds", w.age.count()},
              {"reason", w.reason}};
  out["reasonAgeSeconds"] = w.reasonAge ? json(w.reasonAge->count()) : json(nullptr);
  return out;
}

json toJson(const LostView& l) {
  return {{"namespace", l.ns},
          {"name", l.name},
          {"backend", l.backend},
          {"backendPod", l.backendPod},
          {"problem", problemName(l.problem)},
          {"detail", l.detail},
          {"condition", l.condition},
          {"deleting", l.deleting},
          {"action", l.action ? toJson(*l.action) : json(nullptr)}};
}

json toJson(const TaintedView& t) {
  return {{"backendPod", t.backendPod},
          {"rule", t.rule},
          {"taint", t.taint},
          {"ageSeconds", t.age ? json(t.age->count()) : json(nullptr)},
          {"eviction", t.eviction}};
}

json toJson(const PodExplanation& e) {
  json events = json::array();
  for (const auto& ev : e.events) {
    events.push_back(toJson(ev));
  }
  json out = {{"namespace", e.ns},
              {"name", e.name},
              {"state", stateName(e.state)},
              {"phase", e.phase},
              {"node", e.node},
              {"summary", e.summary},
              {"backend", e.backend},
              {"backendPod", e.backendPod},
              {"events", events}};
  if (e.backendView) {
    out["backendStatus"] = toJson(*e.backendView);
  }
  if (e.lost) {
    out["backendLost"] = toJson(*e.lost);
  }
  return out;
}

}  // namespace gvirtus::kubectl_gvirtus
