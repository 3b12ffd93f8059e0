#include "kubectl-gvirtus/run.h"

int main(int argc, char** argv) {
  return gvirtus::kubectl_gvirtus::run(argc, argv);
}
