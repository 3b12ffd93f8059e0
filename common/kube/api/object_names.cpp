#include "common/kube/api/object_names.h"

#include <string>

namespace gvirtus {
namespace {

bool isLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool isAlnum(char c) {
  return isLowerAlnum(c) || (c >= 'A' && c <= 'Z');
}

// A DNS-1123 label: lowercase letters, digits and '-', starting and ending alphanumeric.
bool isDnsLabel(std::string_view label) {
  if (label.empty() || label.size() > 63) {
    return false;
  }
  if (!isLowerAlnum(label.front()) || !isLowerAlnum(label.back())) {
    return false;
  }
  for (char c : label) {
    if (!isLowerAlnum(c) && c != '-') {
      return false;
    }
  }
  return true;
}

// The name part of a Kubernetes qualified name.
bool isQualifiedNamePart(std::string_view name) {
  if (name.empty() || name.size() > 63) {
    return false;
  }
  if (!isAlnum(name.front()) || !isAlnum(name.back())) {
    return false;
  }
  for (char c : name) {
    if (!isAlnum(c) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

}  // namespace

bool isDnsSubdomain(std::string_view name) {
  if (name.empty() || name.size() > 253) {
    return false;
  }
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    if (!isDnsLabel(name.substr(start, dot - start))) {
      return false;
    }
    if (dot == std::string_view::npos) {
      return true;
    }
    start = dot + 1;
  }
}

Result<void> validateExtendedResourceName(std::string_view name) {
  const std::string quoted = "\"" + std::string(name) + "\"";
  const size_t slash = name.find('/');
  if (slash == std::string_view::npos || name.find('/', slash + 1) != std::string_view::npos) {
    return fail("must be DOMAIN/NAME (an extended resource such as nvidia.com/gpu), got " + quoted);
  }
  const std::string_view domain = name.substr(0, slash);
  const std::string_view local = name.substr(slash + 1);
  // The kubelet checks "requests." + name as a qualified name, so the domain loses 9.
  if (!isDnsSubdomain(domain) || domain.size() > 253 - 9) {
    return fail("domain \"" + std::string(domain) +
                "\" is not a DNS subdomain (lowercase letters, digits, '-' and '.'), in " + quoted);
  }
  if (domain.starts_with("requests.")) {
    return fail("the domain must not start with \"requests.\", got " + quoted);
  }
  if (domain == "kubernetes.io" || domain.ends_with(".kubernetes.io")) {
    return fail("the kubernetes.io domains hold native resources, not extended ones, got " +
                quoted);
  }
  if (!isQualifiedNamePart(local)) {
    return fail("name \"" + std::string(local) +
                "\" must be 1-63 letters, digits, '-', '_' or '.', starting and ending with a "
                "letter or digit, in " +
                quoted);
  }
  return {};
}

}  // namespace gvirtus
