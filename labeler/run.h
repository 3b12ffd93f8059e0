#pragma once

#include "labeler/options.h"

namespace gvirtus::labeler {

// The whole program once its flags are parsed: client, health server, the labeling loop.
// Returns the exit code.
int run(const Options& options);

}  // namespace gvirtus::labeler
