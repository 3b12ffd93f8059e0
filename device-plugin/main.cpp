#include "common/process/flags.h"
#include "device-plugin/options.h"
#include "device-plugin/run.h"

int main(int argc, char** argv) {
  return gvirtus::runMain(argc, argv, gvirtus::device_plugin::parseOptions,
                          gvirtus::device_plugin::run);
}
