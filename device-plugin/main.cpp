#include "device-plugin/run.h"

int main(int argc, char** argv) {
  return gvirtus::device_plugin::run(argc, argv);
}
