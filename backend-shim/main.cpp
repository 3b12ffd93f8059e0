#include "backend-shim/options.h"
#include "backend-shim/run.h"
#include "common/process/flags.h"

int main(int argc, char** argv) {
  return gvirtus::runMain(argc, argv, gvirtus::backend_shim::parseOptions,
                          gvirtus::backend_shim::run);
}
