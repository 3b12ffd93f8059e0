#include "common/base/atomic_file.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "support/temp_dir.h"

using namespace gvirtus;
using gvirtus::testing::TempDir;

TEST_CASE("a file is written whole, with its mode, and the same content is left alone",
          "[atomic-file]") {
  TempDir dir;
  const auto path = dir.file("a/b/spec.json");
  auto first = writeFileAtomically(path, "one", 0640);
  REQUIRE(first.has_value());
  CHECK(*first);
  CHECK(readWholeFile(path) == "one");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);

  auto again = writeFileAtomically(path, "one", 0640);
  REQUIRE(again.has_value());
  CHECK_FALSE(*again);
  auto changed = writeFileAtomically(path, "two");
  REQUIRE(changed.has_value());
  CHECK(*changed);
  CHECK(readWholeFile(path) == "two");
  // Nothing but the file is left in its folder: no temporary.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator(path.parent_path())) {
    ++entries;
  }
  CHECK(entries == 1);
}

TEST_CASE("a file that cannot be written is an error naming it", "[atomic-file]") {
  TempDir dir;
  const auto blocker = dir.file("file");
  REQUIRE(writeFileAtomically(blocker, "x").has_value());
  auto written = writeFileAtomically(blocker / "inside.json", "y");
  REQUIRE_FALSE(written.has_value());
  CHECK_THAT(written.error().message, Catch::Contains(blocker.string()));
  CHECK(readWholeFile(dir.file("missing")).empty());
}
