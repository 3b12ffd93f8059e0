#include "common/kube/api/object_names.h"

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

using gvirtus::isDnsSubdomain;
using gvirtus::validateExtendedResourceName;

TEST_CASE("object names are DNS subdomains", "[common][object_names]") {
  const std::string label(63, 'a');
  const std::string longest = label + "." + label + "." + label + "." + std::string(61, 'b');
  const std::vector<std::string> good{"a", "gvirtus-gpu", "gpu.gvirtus.io", longest};
  for (const std::string& name : good) {
    INFO(name);
    CHECK(isDnsSubdomain(name));
  }
  const std::vector<std::string> bad{
      "", "Gpu", "-gpu", "gpu-", "a..b", "a_b", std::string(64, 'a'), longest + "b"};
  for (const std::string& name : bad) {
    INFO(name);
    CHECK_FALSE(isDnsSubdomain(name));
  }
}

TEST_CASE("extended resource names follow the API's rules for extended resources",
          "[common][object_names]") {
  for (const char* good :
       {"nvidia.com/gpu", "gvirtus.io/vgpu", "example.com/a_b.c-1", "a.b.c.example.org/X"}) {
    INFO(good);
    CHECK(validateExtendedResourceName(good).has_value());
  }
  const std::vector<std::pair<std::string, std::string>> bad{
      {"gpu", "DOMAIN/NAME"},
      {"nvidia.com/gpu/0", "DOMAIN/NAME"},
      {"/gpu", "not a DNS subdomain"},
      {"Nvidia.com/gpu", "not a DNS subdomain"},
      {"nvidia..com/gpu", "not a DNS subdomain"},
      {"-nvidia.com/gpu", "not a DNS subdomain"},
      {"nvidia.com/", "must be 1-63"},
      {"nvidia.com/-gpu", "must be 1-63"},
      {"nvidia.com/gpu!", "must be 1-63"},
      {"nvidia.com/" + std::string(64, 'g'), "must be 1-63"},
      {"kubernetes.io/gpu", "kubernetes.io"},
      {"node.kubernetes.io/gpu", "kubernetes.io"},
      {"requests.nvidia.com/gpu", "requests."},
  };
  for (const auto& [name, reason] : bad) {
    INFO(name);
    auto valid = validateExtendedResourceName(name);
    REQUIRE_FALSE(valid.has_value());
    CHECK_THAT(valid.error().message, Catch::Contains(reason));
  }
}
