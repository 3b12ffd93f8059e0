#include "backend-shim/backend/port_bind_check.h"

#include <catch2/catch.hpp>

#include "backend-shim/shim_test_support.h"
#include "support/cluster_env.h"

using gvirtus::backend_shim::portBindable;
namespace test = gvirtus::backend_shim::test;

TEST_CASE("backend-shim port_bind_check: a free port binds, a held one does not, either way",
          "[port_bind_check]") {
  const auto port = static_cast<uint16_t>(gvirtus::testing::freePort());
  CHECK(portBindable(port, false) == true);
  CHECK(portBindable(port, true) == true);
  CHECK(portBindable(port, false) == true);  // the tries left nothing behind
  {
    test::PortBlocker blocker(port);
    CHECK(portBindable(port, false) == false);
    // A socket without SO_REUSEADDR keeps the port even from one with it.
    CHECK(portBindable(port, true) == false);
  }
  CHECK(portBindable(port, false) == true);
}
