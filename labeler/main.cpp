#include "common/process/flags.h"
#include "labeler/options.h"
#include "labeler/run.h"

int main(int argc, char** argv) {
  return gvirtus::runMain(argc, argv, gvirtus::labeler::parseOptions, gvirtus::labeler::run);
}
