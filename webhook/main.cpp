#include "webhook/run.h"

int main(int argc, char** argv) {
  return gvirtus::webhook::run(argc, argv);
}
