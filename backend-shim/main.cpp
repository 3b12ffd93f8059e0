#include "backend-shim/run.h"

int main(int argc, char** argv) {
  return gvirtus::backend_shim::run(argc, argv);
}
