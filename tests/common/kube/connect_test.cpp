#include "common/kube/connect.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace gvirtus {
namespace {

namespace fs = std::filesystem;

Result<FlagSet::Outcome> parseArgs(FlagSet& flags, std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<const char*> argv;
  for (const auto& arg : args) {
    argv.push_back(arg.c_str());
  }
  return flags.parse(static_cast<int>(argv.size()), argv.data());
}

TEST_CASE("kube API flags: the binary's defaults, then the flags'", "[kube_connect]") {
  KubeApiLimits limits{.qps = 200, .burst = 400};
  FlagSet flags("prog", "summary");
  addKubeApiFlags(flags, limits, "releases of waiting pods");
  const std::string help = flags.helpText();
  CHECK(help.find("requests per second to the API server (releases of waiting pods) (default "
                  "\"200\")") != std::string::npos);
  CHECK(help.find("(default \"400\")") != std::string::npos);

  REQUIRE(parseArgs(flags, {"--kube-api-qps", "50", "--kube-api-burst=75"}));
  KubeClientOptions options;
  limits.applyTo(options);
  CHECK(options.qps == 50.0);
  CHECK(options.burst == 75);

  FlagSet bounded("prog", "summary");
  addKubeApiFlags(bounded, limits);
  auto refused = parseArgs(bounded, {"--kube-api-qps", "0"});
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message == "--kube-api-qps: must be between 1 and 10000, got 0");
}

TEST_CASE("connectKubeClient names the kubeconfig flag when the file is bad", "[kube_connect]") {
  const fs::path dir = fs::temp_directory_path() / ("kube-connect-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string missing = (dir / "missing").string();
  auto none = connectKubeClient("prog", missing, KubeClientOptions{});
  REQUIRE_FALSE(none);
  CHECK(none.error().message.starts_with("--kubeconfig: "));

  const fs::path good = dir / "kubeconfig";
  std::ofstream(good) << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                         "    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\n"
                         "users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n"
                         "  context: {cluster: c, user: u}\ncurrent-context: c\n";
  auto client = connectKubeClient("prog", good.string(), KubeClientOptions{});
  INFO((client ? "" : client.error().message));
  CHECK(client.has_value());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gvirtus
