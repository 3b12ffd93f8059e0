#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace gvirtus::testing {

// A fresh folder under /tmp, removed with everything in it when the TempDir goes away. Not
// copyable: one owner removes it. /tmp rather than $TMPDIR: tests bind unix sockets in it,
// whose paths must stay under 108 bytes.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "gvirtus-test") {
    std::string pattern =
        (std::filesystem::path("/tmp") / (std::string(prefix) + "-XXXXXX")).string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // NAME inside the folder (it may name a subfolder); nothing is created.
  std::filesystem::path file(std::string_view name) const { return path_ / name; }
  // Writes CONTENT to NAME inside the folder; its path.
  std::string write(std::string_view name, std::string_view content) const {
    const auto path = file(name);
    std::ofstream(path) << content;
    return path.string();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace gvirtus::testing
