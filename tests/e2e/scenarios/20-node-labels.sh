#!/usr/bin/env bash
# The labeler gave every node its role labels and the GPU label (docs/install.md, "Opting
# GPU nodes in"), each "true" or "false".
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

unlabelled() {
  k get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.labels.gvirtus\.io/frontend\.allowed} {.metadata.labels.gvirtus\.io/backend\.allowed} {.metadata.labels.gvirtus\.io/gpu\.present}{"\n"}{end}' |
    awk '{for (i = 2; i <= 4; i++) if ($i != "true" && $i != "false") {print $1; break}} NF < 4 {print $1}' | sort -u
}
all_labelled() { [ -z "$(unlabelled)" ]; }
eventually "every node has gvirtus.io/{frontend.allowed,backend.allowed,gpu.present}" all_labelled ||
  say "unlabelled: $(unlabelled | tr '\n' ' ')"
finish
