#include "common/process/flags.h"
#include "kubectl-gvirtus/options.h"
#include "kubectl-gvirtus/run.h"

int main(int argc, char** argv) {
  return gvirtus::runMain(argc, argv, gvirtus::kubectl_gvirtus::parseOptions,
                          gvirtus::kubectl_gvirtus::run);
}
