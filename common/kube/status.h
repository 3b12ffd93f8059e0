#pragma once

#include <string>

#include "common/base/error.h"

// Private to the KubeClient (kube_*.cpp).
namespace gvirtus::kube_detail {

// "GET /api/v1/nodes/x: 404 NotFound: nodes \"x\" not found", from an API Status body when
// there is one.
Error statusError(const std::string& what, int httpStatus, const std::string& body);

}  // namespace gvirtus::kube_detail
