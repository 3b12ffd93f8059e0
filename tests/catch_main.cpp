#define CATCH_CONFIG_RUNNER
#include <csignal>

#include <catch2/catch.hpp>

int main(int argc, char* argv[]) {
  // As in every binary of ours (common/process/signals): a peer closing a socket is an error
  // value, not the end of the process. OpenSSL writes with write(2), which raises SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  return Catch::Session().run(argc, argv);
}
