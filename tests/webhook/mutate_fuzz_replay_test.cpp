// Runs the fuzz target's property check (fuzz/mutate_fuzz_check.h) under the normal build:
// over the seed corpus, and over seeded random structure-aware mutations of it, so the
// property is exercised on every `make test` even where clang and libFuzzer are missing.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "common/telemetry/log.h"
#include "support/cluster_env.h"
#include "webhook/fuzz/mutate_fuzz_check.h"

using namespace gvirtus::webhook::fuzz;
using nlohmann::json;

namespace {

std::vector<std::pair<std::string, std::string>> corpus() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& entry : std::filesystem::directory_iterator(gvirtus::testing::sourceDir() +
                                                               "/tests/webhook/fuzz/corpus")) {
    std::ifstream in(entry.path());
    std::stringstream s;
    s << in.rdbuf();
    out.emplace_back(entry.path().filename().string(), s.str());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Values the webhook cares about, to plant anywhere in a review.
json interestingValue(std::mt19937& rng) {
  static const std::vector<json> values = {
      nullptr,
      true,
      false,
      0,
      -1,
      1.5,
      "",
      "true",
      "false",
      json::object(),
      json::array(),
      "gvirtus-config",
      "/etc/gvirtus",
      "GVIRTUS_CONFIG",
      "CUDA_VISIBLE_DEVICES",
      "nvidia.com/gpu",
      "gvirtus.io/backend",
      "gvirtus.io/backend-pod",
      "gvirtus.io/properties",
      "gvirtus.io/backend-status",
      "gvirtus.io/enabled",
      "gvirtus.io/containers",
      "gvirtus.io/gpu-memory",
      "gvirtus.io/gpus",
      "gvirtus.io/backend-policy",
      "gpu-scheduling-map",
      "apps.kubernetes.io/pod-index",
      "10.0.0.9:9999",
      "app",
      "worker",
      "0=node1:0,1\n1=node2:2\n",
      "x=",
      "16Gi",
      "same-zone",
      "round-robin",
      "waiting",
      json{{"name", "gvirtus-config"}, {"mountPath", "/etc/gvirtus"}},
      json{{"name", "gvirtus-config"}, {"emptyDir", json::object()}},
      json{{"name", "GVIRTUS_CONFIG"}, {"value", "/x"}},
      json{{"name", "CUDA_VISIBLE_DEVICES"}, {"valueFrom", json::object()}},
      json{{"name", "gvirtus.io/backend"}},
      json{{"name", "app"}, {"image", "x"}},
      json{{"gvirtus.io/enabled", "true"}},
      json{{"matchExpressions", json::array()}}};
  return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
}

// Collects pointers to every object and array in `doc`.
void containers(json& doc, std::vector<json*>& out) {
  if (doc.is_object() || doc.is_array()) {
    out.push_back(&doc);
    for (auto& child : doc) {
      containers(child, out);
    }
  }
}

void mutate(json& doc, std::mt19937& rng) {
  std::vector<json*> nodes;
  containers(doc, nodes);
  json& node = *nodes[std::uniform_int_distribution<size_t>(0, nodes.size() - 1)(rng)];
  const int action = std::uniform_int_distribution<int>(0, 3)(rng);
  if (node.is_object()) {
    std::vector<std::string> keys;
    for (auto it = node.begin(); it != node.end(); ++it) {
      keys.push_back(it.key());
    }
    json key = interestingValue(rng);
    if (action == 0 && !keys.empty()) {
      node.erase(keys[std::uniform_int_distribution<size_t>(0, keys.size() - 1)(rng)]);
    } else if (action == 1 && !keys.empty()) {
      node[keys[std::uniform_int_distribution<size_t>(0, keys.size() - 1)(rng)]] =
          interestingValue(rng);
    } else {
      node[key.is_string() ? key.get<std::string>() : "name"] = interestingValue(rng);
    }
  } else if (node.is_array()) {
    if (action == 0 && !node.empty()) {
      node.erase(node.begin() + std::uniform_int_distribution<long>(0, long(node.size()) - 1)(rng));
    } else if (action == 1 && !node.empty()) {
      node.push_back(node[std::uniform_int_distribution<size_t>(0, node.size() - 1)(rng)]);
    } else {
      node.push_back(interestingValue(rng));
    }
  }
}

}  // namespace

TEST_CASE("the fuzz property holds on the seed corpus", "[fuzz]") {
  gvirtus::log::configure(gvirtus::log::Level::Error, gvirtus::log::Format::Text);
  FuzzHarness harness;
  for (const auto& [name, body] : corpus()) {
    INFO(name);
    CHECK(checkOneInput(harness, body) == "");
    // Every prefix of a seed, too (truncated bodies).
    for (size_t cut = 0; cut < body.size(); cut += 97) {
      CHECK(checkOneInput(harness, std::string_view(body).substr(0, cut)) == "");
    }
  }
}

TEST_CASE("the fuzz property holds on random mutations of the corpus", "[fuzz]") {
  gvirtus::log::configure(gvirtus::log::Level::Error, gvirtus::log::Format::Text);
  FuzzHarness harness;
  // GVIRTUS_FUZZ_ITERATIONS and GVIRTUS_FUZZ_SEED make longer or other runs by hand.
  const char* iterationsText = std::getenv("GVIRTUS_FUZZ_ITERATIONS");
  const char* seedText = std::getenv("GVIRTUS_FUZZ_SEED");
  const int iterations = iterationsText != nullptr ? std::atoi(iterationsText) : 4000;
  std::mt19937 rng(seedText != nullptr ? static_cast<unsigned>(std::atoi(seedText)) : 20261122u);
  std::vector<json> seeds;
  for (const auto& [name, body] : corpus()) {
    json doc = json::parse(body, nullptr, false);
    if (!doc.is_discarded()) {
      seeds.push_back(doc);
    }
  }
  REQUIRE_FALSE(seeds.empty());
  int failures = 0;
  for (int i = 0; i < iterations && failures < 5; ++i) {
    json doc = seeds[static_cast<size_t>(i) % seeds.size()];
    const int rounds = std::uniform_int_distribution<int>(1, 6)(rng);
    for (int r = 0; r < rounds; ++r) {
      mutate(doc, rng);
    }
    const std::string body = doc.dump();
    const std::string failure = checkOneInput(harness, body);
    if (!failure.empty()) {
      ++failures;
      FAIL_CHECK(failure << "\ninput: " << body);
    }
  }
  gvirtus::log::configure(gvirtus::log::Level::Info, gvirtus::log::Format::Text);
}
