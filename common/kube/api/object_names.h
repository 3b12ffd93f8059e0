#pragma once

#include <string_view>

#include "common/base/error.h"

// Names as the Kubernetes API validates them, checked where our flags take them so that a
// bad one fails at start with one line rather than at the first write.
namespace gvirtus {

// An object name (a DNS-1123 subdomain): at most 253 characters, parts separated by '.',
// each 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or
// digit.
bool isDnsSubdomain(std::string_view name);

// An extended resource name, as a device plugin advertises and a DeviceClass names:
// "DOMAIN/NAME" outside the kubernetes.io domains (nvidia.com/gpu, gvirtus.io/gpu). The
// error says which part is wrong.
Result<void> validateExtendedResourceName(std::string_view name);

}  // namespace gvirtus
