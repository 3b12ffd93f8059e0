# Front door. `make test` and `make demo` work on a fresh Debian bookworm machine.
SHELL := /bin/bash
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CLUSTER_NAME ?= gvirtus
FUZZ_SECONDS ?= 60
DEB_PACKAGES := clang-16 libclang-rt-16-dev build-essential cmake ninja-build pkg-config clang-format \
  libcpp-httplib-dev nlohmann-json3-dev libssl-dev libc-ares-dev libyaml-cpp-dev catch2 \
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc \
  ca-certificates curl git iproute2 procps

.PHONY: bench
.PHONY: deps build test unit-test integration-test e2e-test fuzz images images-test demo demo-down \
  cluster-build cluster-up cluster-down format format-check clean

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

build: deps
	@start=$$SECONDS; \
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && \
	cmake --build $(BUILD_DIR) -j $(JOBS) && \
	echo "[build] done in $$((SECONDS - start))s"

unit-test: build
	@start=$$SECONDS; \
	ctest --test-dir $(BUILD_DIR) -L unit --output-on-failure -j $(JOBS) && \
	echo "[unit-test] done in $$((SECONDS - start))s"

cluster-build:
	@bash tests/cluster/build.sh >/dev/null

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

# Container images: one builder stage compiles the C++ for all of them. The test step
# runs each image as its non-root user, and says plainly when no Docker engine answers.
images:
	@bash images/build.sh

images-test:
	@bash images/build.sh --test

# libFuzzer over the webhook's AdmissionReview handler, ASan and UBSan, for a bounded
# time. clang 16 defines __cpp_concepts one revision short of what libstdc++ 12 wants
# before it offers std::expected (all its uses compile): hence the redefinition.
fuzz: deps
	@set -o pipefail; start=$$SECONDS; \
	CXX=clang++-16 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DGVIRTUS_FUZZ=ON -DGVIRTUS_WERROR=OFF \
	  -DCMAKE_CXX_FLAGS="-D__cpp_concepts=202002L -Wno-macro-redefined" >/dev/null && \
	cmake --build build-fuzz -j $(JOBS) --target mutate_fuzz && \
	mkdir -p build-fuzz/corpus && \
	build-fuzz/tests/mutate_fuzz -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  build-fuzz/corpus tests/webhook/fuzz/corpus 2>&1 | tail -n 12 && \
	echo "[fuzz] $(FUZZ_SECONDS)s of fuzzing without a finding; done in $$((SECONDS - start))s"

# The end-to-end scenarios on their own local cluster, components as host processes.
e2e-test: build cluster-build
	@bash tests/e2e/local/run-local-e2e.sh gvirtus-e2e

test: format-check unit-test fuzz integration-test e2e-test images-test
	@echo "[test] all suites passed"

# Benchmarks against peers (agnhost), not part of make test: writes docs/performance.md.
bench: deps cluster-build
	@BUILD_DIR=$(BUILD_DIR) JOBS=$(JOBS) bash tests/bench/run.sh

demo: build cluster-build
	@bash tests/e2e/demo.sh

demo-down:
	@bash tests/e2e/local/local-down.sh gvirtus-demo

format:
	@git ls-files '*.cpp' '*.h' | xargs clang-format -i

format-check:
	@bad=$$(git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run 2>&1 | grep -c warning); \
	if [ "$$bad" != 0 ]; then echo "[format] clang-format would change files: run make format" >&2; \
	  git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run 2>&1 | grep warning | head; exit 1; fi; \
	echo "[format] clean"

clean:
	rm -rf $(BUILD_DIR)
