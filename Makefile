# Front door. `make test` and `make demo` work on a fresh Debian bookworm machine.
SHELL := /bin/bash
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CLUSTER_NAME ?= gvirtus
OPERATOR_CLUSTER ?= gvirtus-op
FUZZ_SECONDS ?= 60
FUZZ_PARSER_SECONDS ?= 15
DEB_PACKAGES := clang-16 libclang-rt-16-dev build-essential cmake ninja-build pkg-config clang-format-16 shellcheck \
  libcpp-httplib-dev nlohmann-json3-dev libssl-dev libc-ares-dev libyaml-cpp-dev catch2 \
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc \
  ca-certificates curl git iproute2 procps jq qemu-user-static runc ccache

.PHONY: bench bench-build bench-real bench-scale
.PHONY: tools docs docs-check operator-test
.PHONY: deps build test unit-test integration-test e2e-test fuzz images images-test images-push demo demo-down \
  demo-test control-plane cluster-build node-image cluster-up cluster-down format format-check shellcheck clean

# Installs the Debian packages the build needs; does nothing when they are all there.
deps:
	@missing=$$(dpkg-query -W -f='$${Package} $${Status}\n' $(DEB_PACKAGES) 2>/dev/null | \
	  awk '$$NF!="installed"{print $$1}'; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W $$p >/dev/null 2>&1 || echo $$p; done | sort -u); \
	if [ -z "$$missing" ]; then echo "[deps] all Debian packages present"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "[deps] run as root (or install: $$missing)" >&2; exit 1; fi; \
	echo "[deps] installing:" $$missing; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	  --no-install-recommends $$missing >/dev/null

# ccache (~/.cache/ccache), keyed on paths relative to the checkout: a second clone, or a
# rebuild after `make clean`, compiles only what changed, and so does the image builder for
# this machine's platform, which reads the same cache (images/Dockerfile.builder). ccache
# keys on the locale too (the compiler's messages): both compile with LANG=C.UTF-8 alone.
build: deps
	@start=$$SECONDS; \
	export CCACHE_BASEDIR=$(CURDIR) CCACHE_NOHASHDIR=1 LANG=C.UTF-8; unset LC_ALL LC_CTYPE LC_MESSAGES; \
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache >/dev/null && \
	cmake --build $(BUILD_DIR) -j $(JOBS) && \
	echo "[build] done in $$((SECONDS - start))s"

unit-test: build
	@start=$$SECONDS; \
	ctest --test-dir $(BUILD_DIR) -L unit --output-on-failure -j $(JOBS) && \
	echo "[unit-test] done in $$((SECONDS - start))s"

# What every local cluster runs: the control plane, the real nodes' kubelet and kube-proxy,
# and containerd, cached by version.
control-plane:
	@bash tests/cluster/build.sh >/dev/null && bash tests/cluster/node/build.sh --binaries-only

# ... and KAI-Scheduler, which the demo does not run.
cluster-build: control-plane
	@bash tests/cluster/kai/build.sh >/dev/null

# The real nodes' image (kubelet + containerd + kube-proxy in a container).
node-image: control-plane
	@bash tests/cluster/node/build.sh >/dev/null

cluster-up: cluster-build
	@bash tests/cluster/up.sh $(CLUSTER_NAME)

cluster-down:
	@bash tests/cluster/down.sh $(CLUSTER_NAME)

# Integration tests start their own cluster and always stop it.
integration-test: build cluster-build
	@start=$$SECONDS; \
	bash tests/cluster/with-cluster.sh gvirtus-it \
	  ctest --test-dir $(BUILD_DIR) -L integration --output-on-failure && \
	echo "[integration-test] done in $$((SECONDS - start))s"

# Container images for linux/amd64 and linux/arm64 (the C++ cross-compiled for arm64 in
# the one builder stage), built with buildx on a local BuildKit daemon and pushed to the
# local registry the real nodes pull from (tests/cluster/registry). The test step checks
# the pushed manifest lists and runs each image (arm64 under qemu-user).
images: deps
	@bash images/build.sh

images-test: deps
	@bash images/build.sh --test

# The release path: REGISTRY=registry.example.com/gvirtus-k8s make images-push
images-push:
	@test -n "$(REGISTRY)" || { echo "images-push: set REGISTRY, e.g. REGISTRY=ghcr.io/acme/gvirtus-k8s" >&2; exit 2; }
	@REGISTRY="$(REGISTRY)" bash images/build.sh

# libFuzzer, ASan and UBSan, for a bounded time each: the webhook's AdmissionReview handler
# (FUZZ_SECONDS), then the parsers of untrusted text: watch events, gpu-scheduling-map,
# quantities, kubeconfig and HTTP request heads (FUZZ_PARSER_SECONDS each). clang 16 defines
# __cpp_concepts one revision short of what libstdc++ 12 wants before it offers
# std::expected (all its uses compile): hence the redefinition. Cached by ccache, as make
# build: a second clone compiles only what changed.
FUZZ_TARGETS := watch_event scheduling_map quantity kubeconfig http_request
fuzz: deps
	@set -o pipefail; start=$$SECONDS; \
	export CCACHE_BASEDIR=$(CURDIR) CCACHE_NOHASHDIR=1; \
	CXX=clang++-16 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache \
	  -DGVIRTUS_FUZZ=ON -DGVIRTUS_WERROR=OFF \
	  -DCMAKE_CXX_FLAGS="-D__cpp_concepts=202002L -Wno-macro-redefined" >/dev/null && \
	cmake --build build-fuzz -j $(JOBS) --target mutate_fuzz $(FUZZ_TARGETS:%=%_fuzz) && \
	mkdir -p build-fuzz/corpus && \
	build-fuzz/tests/mutate_fuzz -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  build-fuzz/corpus tests/webhook/fuzz/corpus 2>&1 | tail -n 12 && \
	echo "[fuzz] mutate: $(FUZZ_SECONDS)s without a finding" && \
	for target in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus-$$target && \
	  build-fuzz/tests/$${target}_fuzz -max_total_time=$(FUZZ_PARSER_SECONDS) \
	    build-fuzz/corpus-$$target tests/fuzz/corpus/$$target >build-fuzz/$$target.log 2>&1 || \
	    { tail -n 40 build-fuzz/$$target.log; echo "[fuzz] $$target: FAILED (build-fuzz/$$target.log)"; exit 1; }; \
	  echo "[fuzz] $$target: $(FUZZ_PARSER_SECONDS)s without a finding, $$(grep -oE 'corp: [0-9]+/[0-9a-zA-Z]+' build-fuzz/$$target.log | tail -1)"; \
	done && \
	echo "[fuzz] done in $$((SECONDS - start))s"

# The end-to-end scenarios on their own local cluster with real nodes: the project's
# images run as pods under kubelet + containerd.
# K8S_VERSION=v1.35.4 make e2e-test: the same on the oldest supported release.
e2e-test: node-image tools
	@HELM=$$(source tests/tools/versions.sh && echo "$$HELM_BIN") bash tests/e2e/real/run-e2e.sh gvirtus-e2e

# helm and promtool from the Go module proxy, cached by version (tests/tools/versions.sh),
# with the Go that cluster-build finds or installs.
tools: cluster-build
	@bash tests/tools/build-tools.sh >/dev/null

# docs/flags.md from the binaries' --help; docs-check fails when it is stale or when a
# link points outside the repository.
docs: build
	@bash tests/docs/flags-reference.sh $(BUILD_DIR)/bin >docs/flags.md.tmp && \
	  mv docs/flags.md.tmp docs/flags.md && echo "[docs] docs/flags.md regenerated"

docs-check: build
	@bash tests/docs/docs_check.sh $(BUILD_DIR)/bin

# The chart, the alert rules and the metrics they use (CTest label operator), then the
# chart installed, upgraded and uninstalled on a throwaway cluster (operator-cluster).
operator-test: build cluster-build tools
	@start=$$SECONDS; \
	ctest --test-dir $(BUILD_DIR) -L '^operator$$' --output-on-failure && \
	bash tests/cluster/with-cluster.sh $(OPERATOR_CLUSTER) \
	  ctest --test-dir $(BUILD_DIR) -L '^operator-cluster$$' --output-on-failure && \
	echo "[operator-test] done in $$((SECONDS - start))s"

# One stage after another, each timed (tests/lib/stages.sh): first what the suites share,
# built and cached by version, then the suites.
TEST_STAGES := deps format-check shellcheck build cluster-build tools node-image docs-check unit-test fuzz \
  operator-test integration-test e2e-test demo-test images-test
test:
	@bash tests/lib/stages.sh $(TEST_STAGES) && echo "[test] all suites passed"

# Benchmarks against peers (agnhost), not part of make test: writes docs/performance.md.
bench: deps cluster-build
	@BUILD_DIR=$(BUILD_DIR) JOBS=$(JOBS) bash tests/bench/run.sh

# Every benchmark binary into $(BUILD_DIR)/tests (make build leaves them out).
bench-build: build
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target benchmarks

# The webhook at cluster scale: kwok nodes, 50,000 GVirtuS pods, 10,000 waiting (the sizes:
# tests/bench/scale_bench.cpp), then the labeler over 5,000 nodes. Not part of make test; the
# tables go to build/bench/scale.md and build/bench/labeler.md.
bench-scale: build cluster-build
	@start=$$SECONDS; mkdir -p $(BUILD_DIR)/bench && \
	cmake --build $(BUILD_DIR) -j $(JOBS) --target scale_bench labeler_bench && \
	GVIRTUS_BENCH_OUT=$(CURDIR)/$(BUILD_DIR)/bench \
	GLIBC_TUNABLES=$$(sed -n 's/^ENV GLIBC_TUNABLES=//p' images/Dockerfile.webhook) \
	CLUSTER_CONFIG=$(CURDIR)/tests/bench/scale-cluster.yaml \
	bash tests/cluster/with-cluster.sh bench-scale $(BUILD_DIR)/tests/scale_bench && \
	BENCH_NODES=5000 GVIRTUS_BENCH_OUT=$(CURDIR)/$(BUILD_DIR)/bench \
	bash tests/cluster/with-cluster.sh bench-labeler $(BUILD_DIR)/tests/labeler_bench && \
	echo "[bench-scale] done in $$((SECONDS - start))s"

# Pods on real nodes: create -> Running on each path, the CUDA path against the host network,
# failover after a lost backend pod and a lost node (tests/bench/real-nodes/README.md).
bench-real: deps node-image
	@bash tests/bench/real-nodes-bench.sh

# The demo builds only what it runs: no host build (the images' one builder compiles the
# C++, the kubectl plugin included), images for this machine's platform only.
demo: deps node-image
	@bash tests/e2e/demo.sh

# The demo's whole story on its own cluster, each step asserted, the commands it suggests
# run as shown; then the cluster is stopped. Part of make test.
demo-test: deps node-image
	@start=$$SECONDS; bash tests/e2e/demo.sh --check && echo "[demo-test] done in $$((SECONDS - start))s"

demo-down:
	@bash tests/e2e/real/down.sh gvirtus-demo

# clang-format 16 (InsertBraces needs 15 or later); the check fails when it cannot run.
CLANG_FORMAT := clang-format-16
format: deps
	@git ls-files -z '*.cpp' '*.h' | xargs -0 $(CLANG_FORMAT) -i

format-check: deps
	@command -v $(CLANG_FORMAT) >/dev/null || { echo "[format] $(CLANG_FORMAT) is missing" >&2; exit 1; }; \
	log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
	if ! git ls-files -z '*.cpp' '*.h' | xargs -0 $(CLANG_FORMAT) --dry-run -Werror 2>"$$log"; then \
	  grep -m 10 'error:' "$$log" >&2; \
	  echo "[format] clang-format would change files: run make format" >&2; exit 1; fi; \
	echo "[format] clean ($$(git ls-files '*.cpp' '*.h' | wc -l) files)"

# Every shell script, with the settings in .shellcheckrc; fails on any finding.
shellcheck: deps
	@command -v shellcheck >/dev/null || { echo "[shellcheck] shellcheck is missing" >&2; exit 1; }; \
	git ls-files -z '*.sh' '.ci/run' | xargs -0 shellcheck && \
	echo "[shellcheck] clean ($$(git ls-files '*.sh' '.ci/run' | wc -l) scripts)"

clean:
	rm -rf $(BUILD_DIR)
