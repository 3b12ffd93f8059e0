// A leader-election candidate for the integration tests: runs a LeaderElector on a Lease
// and prints one line on stdout per change, flushed at once:
//   LEADING <identity>   when it becomes the leader
//   STOPPED <identity>   when it stops being the leader
//   FOLLOWS <identity> <leader>  when it has read the Lease held by another candidate
//   EXITING <identity>   after a clean shutdown (SIGTERM/SIGINT), the Lease released
// Logs go to stderr.
#include <cstdio>
#include <string>

#include "common/controller/leader_election.h"
#include "common/kube/connect.h"
#include "common/process/flags.h"
#include "common/process/signals.h"

namespace {

void say(const char* what, const std::string& identity) {
  std::printf("%s %s\n", what, identity.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gvirtus;
  ShutdownSignal& shutdown = ShutdownSignal::install();
  FlagSet flags("lease-contender", "Contends for a Lease and prints LEADING/STOPPED lines.");
  CommonOptions common;
  addCommonFlags(flags, common);
  LeaderElectionConfig config;
  config.ns = "default";
  config.name = "gvirtus-lease-contender";
  flags.addString("namespace", &config.ns, "namespace of the Lease");
  flags.addString("name", &config.name, "name of the Lease");
  flags.addString("identity", &config.identity, "this candidate's identity (required)");
  flags.addDuration("lease-duration", &config.leaseDuration, "how long a lease is valid");
  flags.addDuration("renew-deadline", &config.renewDeadline,
                    "how long the leader retries renewing before giving up");
  flags.addDuration("retry-period", &config.retryPeriod, "time between attempts");
  if (auto code = parseCommandLine(flags, common, argc, argv)) {
    return *code;
  }
  if (auto valid = validate(config); !valid) {
    return usageError(flags, valid.error().message);
  }
  KubeClientOptions options;
  // A request must end well within the renew deadline (see LeaderElector).
  options.requestTimeout = config.renewDeadline / 3;
  options.maxRetries = 0;
  auto client = connectKubeClient("lease-contender", common.kubeconfig, options);
  if (!client) {
    std::fprintf(stderr, "lease-contender: %s\n", client.error().message.c_str());
    return kExitFatal;
  }
  const std::string identity = config.identity;
  config.onStartedLeading = [&identity](std::stop_token) { say("LEADING", identity); };
  config.onStoppedLeading = [&identity] { say("STOPPED", identity); };
  config.onNewLeader = [&identity](const std::string& leader) {
    if (leader != identity) {
      say("FOLLOWS", identity + " " + leader);
    }
  };
  LeaderElector elector(**client, config);
  if (auto started = elector.start(); !started) {
    std::fprintf(stderr, "lease-contender: %s\n", started.error().message.c_str());
    return kExitFatal;
  }
  shutdown.wait();
  elector.stop();
  say("EXITING", identity);
  return kExitOk;
}
