// The backend's output as the shim writes it: whole lines on one descriptor, whatever the
// pieces its writers sent.
#include "backend-shim/backend/output.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "backend-shim/shim_test_support.h"
#include "support/cluster_env.h"

using namespace gvirtus::backend_shim;
using namespace std::chrono_literals;
using gvirtus::testing::eventually;

namespace {

void put(int fd, const std::string& text) {
  REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
}

struct Target {
  test::TempDir dir;
  std::string path = dir.file("out.txt");
  gvirtus::UniqueFd fd{::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  std::string text() const {
    std::ifstream in(path);
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
  }
};

}  // namespace

TEST_CASE("backend-shim backend_output: lines of both streams, each whole", "[backend_output]") {
  Target target;
  BackendOutputOptions options;
  options.target = target.fd.get();
  options.idleFlush = 30s;  // no partial line is flushed for being idle here
  auto output = BackendOutput::start(options);
  REQUIRE(output.has_value());
  const ProcessOutput ends = (*output)->childOutput();
  put(ends.stdoutFd, "Up and ");
  put(ends.stderrFd, "warning: no GPU\nCurrent active");
  // The other stream's line goes out whole, not glued to this one's start.
  REQUIRE(eventually([&] { return (*output)->lines() == 1; }, 10s));
  CHECK(target.text() == "warning: no GPU\n");
  put(ends.stdoutFd, "running!\n");
  REQUIRE(eventually([&] { return (*output)->lines() == 2; }, 10s));
  CHECK(target.text() == "warning: no GPU\nUp and running!\n");
  // Stopping writes what is held, the partial line too.
  output->reset();
  CHECK(target.text() == "warning: no GPU\nUp and running!\nCurrent active\n");
}

TEST_CASE("backend-shim backend_output: a partial line goes out after a quiet moment",
          "[backend_output]") {
  Target target;
  BackendOutputOptions options;
  options.target = target.fd.get();
  options.idleFlush = 100ms;
  auto output = BackendOutput::start(options);
  REQUIRE(output.has_value());
  put((*output)->childOutput().stdoutFd, "Current active childs: -9764");
  REQUIRE(eventually([&] { return (*output)->lines() == 1; }, 10s));
  CHECK(target.text() == "Current active childs: -9764\n");
}
