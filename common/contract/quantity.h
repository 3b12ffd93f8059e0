#pragma once

#include <string_view>

#include "common/base/error.h"

namespace gvirtus {

// Parses a Kubernetes resource quantity ("16Gi", "500M", "1.5G", "100m", "12e3", "+2")
// into its value in base units (bytes for memory). The error is one line quoting the text.
Result<double> parseQuantity(std::string_view text);

// A quantity of memory in MiB, rounded up ("16Gi" -> 16384, "1M" -> 1); negative values
// are errors.
Result<long long> parseMemoryMiB(std::string_view text);

}  // namespace gvirtus
