#include "common/process/flags.h"
#include "webhook/options.h"
#include "webhook/run.h"

int main(int argc, char** argv) {
  return gvirtus::runMain(argc, argv, gvirtus::webhook::parseOptions, gvirtus::webhook::run);
}
