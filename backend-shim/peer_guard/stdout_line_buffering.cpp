// GVirtuS logs through C stdio. Behind the shim's pipe its stdout is fully buffered, so its
// lines reached the pod's log late, in blocks of 4 KiB, or not at all when it was killed.
// Line-buffered from before its main, each line is written when it ends. stderr stays as C
// leaves it, unbuffered: already prompt, and a last message without a newline is not lost
// to a crash. The shim puts the pieces of a line back together (backend/output.h).
#include <stdio.h>

namespace gvirtus::peer_guard {
namespace {

[[gnu::constructor]] void lineBufferStdout() {
  // Nothing has been written to stdout yet: the program's main has not run.
  setvbuf(stdout, nullptr, _IOLBF, 0);
}

}  // namespace
}  // namespace gvirtus::peer_guard
