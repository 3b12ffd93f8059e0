#include "kubectl-gvirtus/options.h"

#include <catch2/catch.hpp>
#include <vector>

namespace {

using gvirtus::kubectl_gvirtus::Command;
using gvirtus::kubectl_gvirtus::Options;
using gvirtus::kubectl_gvirtus::Output;
using gvirtus::kubectl_gvirtus::parseOptions;

std::expected<Options, int> parse(std::vector<const char*> args) {
  args.insert(args.begin(), "kubectl-gvirtus");
  return parseOptions(static_cast<int>(args.size()), args.data());
}

TEST_CASE("commands and kubectl's short flags", "[options]") {
  auto status = parse({});
  REQUIRE(status);
  CHECK(status->command == Command::Status);
  CHECK(status->output == Output::Text);

  auto why = parse({"why", "my-pod", "-n", "team-a", "-o", "json"});
  REQUIRE(why);
  CHECK(why->command == Command::Why);
  CHECK(why->pod == "my-pod");
  CHECK(why->ns == "team-a");
  CHECK(why->output == Output::Json);

  auto joined = parse({"-ojson", "why", "pod/my-pod", "--namespace=team-b"});
  REQUIRE(joined);
  CHECK(joined->pod == "my-pod");
  CHECK(joined->ns == "team-b");
  CHECK(joined->output == Output::Json);

  auto backends = parse({"backends", "--kubeconfig", "/tmp/kc", "--backend-namespace", "gpu"});
  REQUIRE(backends);
  CHECK(backends->command == Command::Backends);
  CHECK(backends->kubeconfig == "/tmp/kc");
  CHECK(backends->backendNamespace == "gpu");
}

TEST_CASE("bad command lines exit 2", "[options]") {
  CHECK(parse({"why"}).error() == 2);
  CHECK(parse({"frobnicate"}).error() == 2);
  CHECK(parse({"status", "extra"}).error() == 2);
  CHECK(parse({"-o", "yaml"}).error() == 2);
  CHECK(parse({"why", "deployment/x"}).error() == 2);
  CHECK(parse({"--no-such-flag"}).error() == 2);
  CHECK(parse({"--help"}).error() == 0);
}

}  // namespace
