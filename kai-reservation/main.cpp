#include "common/process/flags.h"
#include "kai-reservation/options.h"
#include "kai-reservation/run.h"

int main(int argc, char** argv) {
  return gvirtus::runMain(argc, argv, gvirtus::kai_reservation::parseOptions,
                          gvirtus::kai_reservation::run);
}
