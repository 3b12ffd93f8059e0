#include "labeler/run.h"

int main(int argc, char** argv) {
  return gvirtus::labeler::run(argc, argv);
}
