#pragma once

namespace gvirtus::labeler {

// The whole program: flags, client, health server, the labeling loop. Returns the exit code.
int run(int argc, const char* const* argv);

}  // namespace gvirtus::labeler
