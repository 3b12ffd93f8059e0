#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string_view>

#include "common/base/error.h"

// Files that readers on the host take as they are (CDI specs, a claim's properties.json, the
// backend's config): a reader sees the old content or the new, never half of either, and a
// crash leaves no partial file under the name.
namespace gvirtus {

// Writes `content` to `path`: a temporary file in the same folder (a hidden name that does
// not end like the file, so that a folder scan skips it), synced, given `mode`, renamed over
// `path`, and the folder synced. Creates the folder when missing. A file that already holds
// exactly `content` is left alone: returns false then, true when it wrote.
Result<bool> writeFileAtomically(const std::filesystem::path& path, std::string_view content,
                                 mode_t mode = 0644);

// The whole content of `path`, or an empty string when it cannot be read.
std::string readWholeFile(const std::filesystem::path& path);

}  // namespace gvirtus
