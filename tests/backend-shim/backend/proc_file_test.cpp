#include "backend-shim/backend/proc_file.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>

using namespace gvirtus::backend_shim;

TEST_CASE("backend-shim proc_file: this process's stat, and a pid that is gone", "[proc_file]") {
  const auto self = readProcStat(::getpid());
  REQUIRE(self.has_value());
  CHECK(self->state == 'R');
  CHECK(self->parent == ::getppid());
  CHECK(self->group == ::getpgrp());
  CHECK_FALSE(readProcStat(-1).has_value());
  CHECK_FALSE(readProcStat(0x3fffffff).has_value());
}

TEST_CASE("backend-shim proc_file: whole files, and errors naming the path", "[proc_file]") {
  auto tcp = readProcFile("/proc/net/tcp");
  REQUIRE(tcp.has_value());
  CHECK_THAT(*tcp, Catch::StartsWith("  sl  local_address"));
  auto missing = readProcFile("/proc/no-such-file");
  REQUIRE_FALSE(missing.has_value());
  CHECK_THAT(missing.error().message, Catch::StartsWith("/proc/no-such-file: "));
}

TEST_CASE("backend-shim proc_file: the pid listing holds this process", "[proc_file]") {
  const auto pids = listPids();
  CHECK(std::find(pids.begin(), pids.end(), ::getpid()) != pids.end());
  CHECK(std::find(pids.begin(), pids.end(), ::getppid()) != pids.end());
}
