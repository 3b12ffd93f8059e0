#pragma once

#include "kubectl-gvirtus/options.h"

// kubectl-gvirtus: reads backends, GVirtuS pods and their Events with the user's
// kubeconfig and prints status, why POD or backends. Exit 0 on success, 1 when the cluster
// cannot be read or the pod does not exist, 2 on a bad command line.
namespace gvirtus::kubectl_gvirtus {

// The whole program once its command line is parsed. Returns the exit code.
int run(const Options& options);

}  // namespace gvirtus::kubectl_gvirtus
