#include "backend-shim/backend/line_splitter.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using gvirtus::backend_shim::LineSplitter;

namespace {

struct Collected {
  std::vector<std::string> lines;
  LineSplitter::Emit emit() {
    return [this](std::string_view line) { lines.emplace_back(line); };
  }
};

}  // namespace

TEST_CASE("backend-shim line_splitter: whole lines out of pieces", "[line_splitter]") {
  LineSplitter splitter;
  Collected out;
  splitter.add("Up and ", out.emit());
  CHECK(out.lines.empty());
  CHECK(splitter.pending());
  splitter.add("running!\nCurrent active childs: 1\r\nCurrent", out.emit());
  CHECK(out.lines == std::vector<std::string>{"Up and running!", "Current active childs: 1"});
  splitter.add("\n\n", out.emit());
  CHECK(out.lines.back().empty());
  CHECK(out.lines[2] == "Current");
  CHECK_FALSE(splitter.pending());
}

TEST_CASE("backend-shim line_splitter: a partial line is flushed on demand", "[line_splitter]") {
  LineSplitter splitter;
  Collected out;
  splitter.add("no newline", out.emit());
  splitter.flush(out.emit());
  CHECK(out.lines == std::vector<std::string>{"no newline"});
  splitter.flush(out.emit());  // nothing held: nothing emitted
  CHECK(out.lines.size() == 1);
}

TEST_CASE("backend-shim line_splitter: a long line is cut into pieces of maxLine bytes",
          "[line_splitter]") {
  LineSplitter splitter(4);
  Collected out;
  splitter.add("ab", out.emit());
  splitter.add("cdefghij\nxy", out.emit());
  CHECK(out.lines == std::vector<std::string>{"abcd", "efgh", "ij"});
  splitter.add("zw\n", out.emit());
  CHECK(out.lines.back() == "xyzw");
}
