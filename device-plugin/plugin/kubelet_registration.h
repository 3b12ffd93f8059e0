#pragma once

#include <filesystem>
#include <string>

#include "common/base/error.h"
#include "common/time/duration.h"

namespace gvirtus::device_plugin {

// The kubelet device plugin API version we speak.
inline constexpr const char* kApiVersion = "v1beta1";

struct RegistrationRequest {
  // Our socket's file name, relative to the kubelet's device-plugins folder.
  std::string endpoint;
  std::string resource;
};

// Calls Registration.Register on the kubelet's socket. The kubelet answers only after it
// has connected to our endpoint, so our server must already be serving.
Result<void> registerWithKubelet(const std::filesystem::path& kubeletSocket,
                                 const RegistrationRequest& request, Duration timeout);

}  // namespace gvirtus::device_plugin
