#pragma once

// kubectl-gvirtus: reads backends, GVirtuS pods and their Events with the user's
// kubeconfig and prints status, why POD or backends. Exit 0 on success, 1 when the cluster
// cannot be read or the pod does not exist, 2 on a bad command line.
namespace gvirtus::kubectl_gvirtus {

int run(int argc, const char* const* argv);

}  // namespace gvirtus::kubectl_gvirtus
