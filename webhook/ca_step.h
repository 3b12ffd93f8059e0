#pragma once

#include "webhook/options.h"
#include "webhook/tls/own_ca.h"

namespace gvirtus::webhook {

// What the own CA is asked to keep, from the flags.
TlsBootstrapOptions tlsBootstrapOptions(const Options& options);

// gvirtus-webhook --ca-role=issue: the CA step alone. It keeps the Secret and the caBundle
// (webhook/tls/bootstrap.h) and serves /healthz, /readyz (ready once the CA is in every
// webhook's caBundle) and /metrics; no admission listener, no controllers. The webhook's
// replicas then run with --ca-role=serve and need no right to write either. Returns the exit
// code as run() does.
int runCaStep(const Options& options);

}  // namespace gvirtus::webhook
