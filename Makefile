# nodelet — build, run, test and benchmark. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.1.0-dev)
LDFLAGS := -X github.com/nodelet/nodelet/internal/version.Version=$(VERSION)
GO ?= go
# Every Go build of the project is static and pure Go: nodelet, its tests,
# its image, and the Kubernetes, CSI and CoreDNS builds of hack/ (which set
# it themselves). One cgo setting everywhere lets them share compiled
# packages (a package compiled with cgo on or off is a different package
# to the build cache). -race needs CGO_ENABLED=1.
CGO_ENABLED ?= 0
export CGO_ENABLED
# Every Go build of the project leaves out gRPC's request tracing
# (golang.org/x/net/trace), which nodelet never serves. That package renders
# its pages with html/template, whose templates call methods by name through
# reflection; a binary that can do that keeps every exported method of every
# type it may hold in an interface, because the linker cannot tell which
# ones a template will call. Without it nodelet's binary is a third smaller
# (about 60 MB, not 88) and its start-up reads fewer of its pages
# (docs/benchmarks.md). Tags of your own go in GO_TAGS beside it,
# comma-separated.
GO_TAGS ?= grpcnotrace
export GOFLAGS := $(strip $(GOFLAGS) -tags=$(GO_TAGS))
GOTESTFLAGS ?=
# The e2e and envtest suites start real API servers and containerds; a
# generous bound keeps a hung run from eating CI's whole budget.
TEST_TIMEOUT ?= 45m
# How long `make fuzz` runs each fuzz target (the pod pipeline, static pod
# manifests, the node API, the CSR approver). make test does not run the
# coverage-guided fuzzer: its instrumentation compiles every package the
# targets import again (about 5 minutes on 2 cores with a cold build cache).
# The unit tests drive the same checks with 2000 mutated seeds per target
# (internal/fuzz/mutate_test.go, internal/approver/fuzz_test.go).
FUZZTIME ?= 10m

# make test and the targets it runs print a banner at each phase with the
# time since the first make started (sub-makes inherit the start).
ifndef MAKE_START
MAKE_START := $(shell date +%s)
endif
export MAKE_START
phase = @echo "==> $(1) [$$(( $$(date +%s) - $(MAKE_START) ))s since make started]"

UNIT_PKGS = $(shell $(GO) list ./... | grep -v /test/)
# make test runs the unit and envtest packages under the race detector,
# which needs cgo: that one go test is built with CGO_ENABLED=1 (its
# packages are compiled apart from the static builds' once, then cached).
# UNIT_RACE= runs them without it.
UNIT_RACE ?= -race
# The e2e suite waits on containers far more than it computes: make test
# runs it in E2E_PROCS ginkgo processes (each with its own containerd and
# API server), beside the other packages under test/, one at a time.
E2E_PROCS ?= 2
E2E_SUITE = ./test/e2e
# The container runtime every suite, make run, make conformance and make
# bench run: containerd2 (containerd 2.4 and runc 1.5, built from the Go
# module proxy by hack/runtime.sh into the cache) or containerd1.6
# (Debian 12's containerd 1.6 and runc 1.1). make test then runs the
# specs labelled runtime-smoke (a pod's lifecycle, adoption after a
# restart, exec and logs, what the runtime reports) on SMOKE_RUNTIME, the
# other one; SMOKE_RUNTIME= leaves that out.
RUNTIME ?= containerd2
export RUNTIME
SMOKE_RUNTIME ?= $(if $(filter containerd1.6,$(RUNTIME)),containerd2,containerd1.6)
TEST_OTHER_PKGS = $(shell $(GO) list ./test/... | grep -v '/test/e2e$$')
# A module of its own that extends nodelet through pkg/nodelet: the root
# module's ./... does not reach into it.
EXAMPLE_DIR = examples/prepuller
# The PromQL check of kube-prometheus' pod dashboard over recorded scrapes
# of /metrics/cadvisor: a module of its own too, so that nodelet's module
# does not require Prometheus (and the cloud SDKs Prometheus requires).
# It imports nothing of nodelet's and reads only its testdata, so make
# dashboards vets, lints and tests it, and make test leaves it out (its
# cold build and module downloads would cost a cold CI run minutes).
DASHBOARDS_DIR = test/dashboards

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/nodelet.
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/nodelet ./cmd

.PHONY: deps
deps: ## Install the Debian packages the tests and the local run need (idempotent).
	$(call phase,deps: Debian packages)
	bash hack/install-deps.sh

.PHONY: envtest
envtest: ## Build kube-apiserver, etcd and kubectl into the cache (a no-op when present).
	$(call phase,envtest: Kubernetes binaries)
	@bash hack/envtest.sh >/dev/null

.PHONY: runtime
runtime: deps ## Build containerd 2 and runc into the cache (a no-op when present), and resolve RUNTIME's binaries.
	$(call phase,runtime: containerd and runc)
	@bash hack/runtime.sh containerd2 >/dev/null
	@bash hack/runtime.sh $(RUNTIME) >/dev/null

.PHONY: generate
generate: ## Regenerate deepcopy functions of the configuration API.
	$(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object paths=./api/...

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet and a gofmt check.
	$(call phase,vet: gofmt and go vet)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [[ -n "$$out" ]]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...
	cd $(EXAMPLE_DIR) && $(GO) vet ./...

.PHONY: lint
lint: ## golangci-lint (pinned, built into the cache) with .golangci.yml, and a go.mod tidiness check.
	$(call phase,lint: golangci-lint and go.mod tidiness)
	"$$(bash hack/golangci-lint.sh)" run --allow-parallel-runners ./...
	lint="$$(bash hack/golangci-lint.sh)"; cd $(EXAMPLE_DIR) && "$$lint" run --allow-parallel-runners --config $(CURDIR)/.golangci.yml ./...
	@bash hack/check-tidy.sh

.PHONY: test
test: deps envtest runtime vet lint ## Lint, unit, envtest and e2e tests against a real API server and containerd (RUNTIME=containerd2|containerd1.6), and a smoke on SMOKE_RUNTIME.
	$(call phase,unit and envtest packages$(if $(UNIT_RACE), under the race detector))
	export KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)"; \
	CGO_ENABLED=$(if $(UNIT_RACE),1,$(CGO_ENABLED)) $(GO) test $(GOTESTFLAGS) $(UNIT_RACE) -timeout $(TEST_TIMEOUT) $(UNIT_PKGS); \
	$(GO) build -o bin/ginkgo github.com/onsi/ginkgo/v2/ginkgo; \
	echo "==> e2e suite ($(RUNTIME)) beside the other suites under test/ [$$(( $$(date +%s) - $(MAKE_START) ))s since make started]"; \
	$(GO) test $(GOTESTFLAGS) -timeout $(TEST_TIMEOUT) -p 1 $(TEST_OTHER_PKGS) & others=$$!; \
	e2e=0; bin/ginkgo run --procs $(E2E_PROCS) --timeout $(TEST_TIMEOUT) --no-color $(E2E_SUITE) || e2e=$$?; \
	smoke=0; if [[ -n "$(SMOKE_RUNTIME)" ]]; then \
		echo "==> runtime smoke on $(SMOKE_RUNTIME) [$$(( $$(date +%s) - $(MAKE_START) ))s since make started]"; \
		RUNTIME=$(SMOKE_RUNTIME) bin/ginkgo run --procs $(E2E_PROCS) --timeout $(TEST_TIMEOUT) --no-color --label-filter=runtime-smoke $(E2E_SUITE) || smoke=$$?; \
	fi; \
	rest=0; wait $$others || rest=$$?; \
	if [[ $$e2e != 0 || $$smoke != 0 || $$rest != 0 ]]; then echo "make test: e2e suite exit $$e2e, runtime smoke on $(SMOKE_RUNTIME) exit $$smoke, other suites under test/ exit $$rest"; exit 1; fi; \
	$(MAKE) --no-print-directory example
	$(call phase,make test passed)

.PHONY: e2e-multinode
e2e-multinode: deps envtest ## The heavy multi-node e2e specs (three nodes: Services, NodePort, drain, node failure), which make test leaves out.
	export KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)"; \
	$(GO) test $(GOTESTFLAGS) -count=1 -timeout $(TEST_TIMEOUT) ./test/e2e/ -ginkgo.focus='Multi-node' -ginkgo.label-filter=heavy -ginkgo.v

.PHONY: e2e-cadvisor
e2e-cadvisor: deps envtest ## The heavy e2e spec that compares /metrics/cadvisor with a real kubelet's (not in make test); CADVISOR_RECORD=dir also records the scrapes (5 minutes of them) and the table there.
	export KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)"; \
	$(if $(CADVISOR_RECORD),NODELET_CADVISOR_RECORD=$(abspath $(CADVISOR_RECORD))) $(GO) test $(GOTESTFLAGS) -v -count=1 -timeout $(TEST_TIMEOUT) ./test/e2e/ -ginkgo.focus='metrics/cadvisor compared' -ginkgo.label-filter=heavy -ginkgo.v

.PHONY: dashboards
dashboards: ## kube-prometheus' pod dashboard (its PromQL, on Prometheus' engine) over the recorded scrapes of /metrics/cadvisor in test/dashboards/testdata.
	$(call phase,dashboards: kube-prometheus' pod dashboard over /metrics/cadvisor)
	cd $(DASHBOARDS_DIR) && $(GO) vet ./...
	lint="$$(bash hack/golangci-lint.sh)"; cd $(DASHBOARDS_DIR) && "$$lint" run --allow-parallel-runners --config $(CURDIR)/.golangci.yml ./...
	@bash hack/check-tidy.sh $(DASHBOARDS_DIR)
	cd $(DASHBOARDS_DIR) && $(GO) test $(GOTESTFLAGS) -count=1 -v ./...

# The cgroup v2 + systemd node: a Debian 12 VM under qemu's software
# emulation (no KVM needed), built with debootstrap and cached by its
# package list (hack/vm/image.sh), with containerd 2, runc and nodelet
# installed in it as on a kubeadm host. Slow (the first image build takes
# 10-20 minutes, each run about 10 more): never part of make test.
VM_TIMEOUT ?= 60m

.PHONY: e2e-vm
e2e-vm: deps envtest build ## nodelet on cgroup v2 with systemd as PID 1: a Debian VM under qemu (software emulation), joined by TLS bootstrap (docs/development.md).
	bash hack/vm/deps.sh
	export KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)"; \
	NODELET_E2E_VM=1 $(GO) test $(GOTESTFLAGS) -count=1 -v -timeout $(VM_TIMEOUT) ./test/vm/ -ginkgo.v

.PHONY: example
example: deps envtest ## Build and test the example extension module.
	$(call phase,example: the extension module)
	export KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)"; \
	cd $(EXAMPLE_DIR); \
	$(GO) vet ./...; \
	$(GO) test $(GOTESTFLAGS) -count=1 -timeout $(TEST_TIMEOUT) ./...

# The suites make conformance runs, one after the other: the node and
# volume specs on one node, then the CSI mock specs on a one-node cluster
# with kube-proxy and CoreDNS. A FOCUS names node specs unless
# CONFORMANCE_SUITES says otherwise.
CONFORMANCE_SUITES ?= $(if $(FOCUS),node,node storage)

.PHONY: conformance
conformance: deps envtest runtime ## Kubernetes' node, volume and CSI mock specs on nodelet and on the real kubelet (NODE=nodelet|kubelet for one, FOCUS=regexp, CONFORMANCE_SUITES).
	export KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)"; \
	rc=0; for suite in $(CONFORMANCE_SUITES); do \
		$(GO) run ./hack/conformance -suite $$suite $(CONFORMANCE_FLAGS) || rc=$$?; \
	done; exit $$rc

.PHONY: conformance-network
conformance-network: deps envtest ## Kubernetes' sig-network specs on a 3-node cluster with kube-proxy and CoreDNS, nodelet and the real kubelet as the nodes' agents (NODE, FOCUS, NODES=n).
	export KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)"; \
	$(GO) run ./hack/conformance -suite network -nodes $(or $(NODES),3) $(CONFORMANCE_FLAGS)

.PHONY: conformance-storage
conformance-storage: deps envtest ## Kubernetes' CSI mock specs on a 1-node cluster with kube-proxy and CoreDNS, nodelet and the real kubelet as the node's agent (NODE, FOCUS).
	export KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)"; \
	$(GO) run ./hack/conformance -suite storage $(CONFORMANCE_FLAGS)

.PHONY: conformance-dra
conformance-dra: deps envtest runtime ## Kubernetes' DRA specs ([DRA]) on a 1-node cluster, the test driver in e2e.test, nodelet and the real kubelet as the node's agent (NODE, FOCUS).
	export KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)"; \
	$(GO) run ./hack/conformance -suite dra $(CONFORMANCE_FLAGS)

.PHONY: conformance-deviceplugin
conformance-deviceplugin: deps envtest runtime ## The node suite's device plugin and pod resources specs (our ports, with the sample device plugin) on a 1-node cluster, nodelet and the real kubelet as the node's agent (NODE, FOCUS).
	export KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)"; \
	$(GO) run ./hack/conformance -suite deviceplugin $(CONFORMANCE_FLAGS)

.PHONY: conformance-network-smoke
conformance-network-smoke: deps envtest ## The network smoke subset on a 2-node nodelet cluster (not in make test).
	export KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)"; \
	NODELET_NETWORK_SMOKE=1 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run TestNetworkSmoke -v ./test/conformance/

.PHONY: conformance-build
conformance-build: ## Build e2e.test, ginkgo, kubelet, agnhost and the sample device plugin into the cache (a no-op when present).
	@bash hack/conformance.sh >/dev/null

.PHONY: csi-build
csi-build: ## Build external-provisioner and external-attacher for the CSI test stack into the cache (a no-op when present).
	@bash hack/csi.sh >/dev/null

.PHONY: addons-build
addons-build: ## Build the kube-proxy and CoreDNS images of the cluster add-ons into the cache (a no-op when present).
	$(GO) run ./hack/addons

.PHONY: conformance-smoke
conformance-smoke: deps envtest ## The conformance smoke subset that make test runs, alone.
	export KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)"; \
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run TestSmoke -v ./test/conformance/

# A manifest is a few KB and each run takes about a millisecond: minimizing
# every new interesting manifest for the default 60s would leave no time to
# fuzz, hence FuzzStaticManifest's -fuzzminimizetime.
.PHONY: fuzz
fuzz: ## Fuzz the pod pipeline (admission, plan, volumes, CRI configs, status), static pod manifests through it, the node API's request handling and the CSR approver's decoding and decisions, each for $$FUZZTIME (10m).
	$(GO) test -run '^$$' -fuzz FuzzPodPipeline -fuzztime $(FUZZTIME) ./internal/fuzz/
	$(GO) test -run '^$$' -fuzz FuzzStaticManifest -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/fuzz/
	$(GO) test -run '^$$' -fuzz FuzzNodeAPI -fuzztime $(FUZZTIME) ./internal/fuzz/
	$(GO) test -run '^$$' -fuzz FuzzCSRDecoding -fuzztime $(FUZZTIME) ./internal/approver/

# Without KUBECONFIG, hack/run.sh installs the packages and builds the
# Kubernetes binaries itself, with a progress line for each step; with it,
# nothing is installed: nodelet runs on the machine's own runtime.
.PHONY: run
run: $(if $(KUBECONFIG),build) ## A local cluster (etcd, API server, controller-manager, scheduler, containerd, nodelet) with a demo; NODES=n for n nodes in network namespaces; with $$KUBECONFIG, nodelet against that cluster.
	@bash hack/run.sh

.PHONY: run-down
run-down: ## Stop the cluster of make run, and clean up after one that was killed.
	@bash hack/run.sh down

.PHONY: test-down
test-down: ## Clean up after tests and benchmarks that were killed: their containerds, pods, mounts, directories, cgroups and bridges.
	$(GO) run ./hack/reap

# BENCH_DENSE_PODS is the side-by-side curve's point past 250 pods, a
# node as dense as clouds sell (empty: none).
BENCH_DENSE_PODS ?= 500

.PHONY: bench
bench: deps envtest runtime ## Benchmarks, printed as tables (BENCH_DENSE_PODS= leaves out the 500-pod point).
	export KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)"; \
	$(GO) test -run '^$$' -bench . -benchmem $(UNIT_PKGS); \
	NODELET_BENCH_DENSE_PODS=$(BENCH_DENSE_PODS) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 90m ./test/bench/; \
	NODELET_BENCH_CLUSTER=1 $(GO) test -run '^$$' -bench 'Cluster' -benchtime 1x -timeout 30m ./test/bench/; \
	NODELET_BENCH_HOLLOW=1 $(GO) test -run '^$$' -bench 'Hollow' -benchtime 1x -timeout 60m ./test/bench/

# IMG overrides the image name and tag; by default it is the one
# config/default deploys (its kustomization's images entry).
IMG ?=
DEPLOYED_IMG = $(shell awk '/newName:/ {n = $$2} /newTag:/ {t = $$2} END {print n ":" t}' config/default/kustomization.yaml)

.PHONY: image
image: ## Build nodelet's image without Docker: bin/nodelet-image.tar, for `ctr -n k8s.io images import` or `docker load`.
	$(GO) run ./hack/image --version "$(VERSION)" --build-tags "$(GO_TAGS)" --output bin/nodelet-image.tar $(if $(IMG),--tag "$(IMG)")

.PHONY: docker-build
docker-build: ## Build the container image with Docker (needs a Docker engine; `make image` does not).
	docker build --build-arg VERSION="$(VERSION)" -t "$(or $(IMG),$(DEPLOYED_IMG))" .
