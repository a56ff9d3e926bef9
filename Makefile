# slurm-operator. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

CACHE ?= $(or $(SLURM_OPERATOR_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/slurm-operator)
export SLURM_OPERATOR_CACHE := $(CACHE)
TOOLS := $(CACHE)/tools

CONTROLLER_TOOLS_VERSION ?= v0.23.0
CONTROLLER_GEN := $(TOOLS)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)

GO_TEST_FLAGS ?=

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: ## Build the manager binary into bin/.
	go build -o bin/manager ./cmd/manager

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and RBAC manifests.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=slurm-operator-manager paths=./internal/... output:rbac:artifacts:config=config/rbac
	cp config/crd/bases/slurm.hpc.dev_slurmclusters.yaml charts/slurm-operator/crds/
	sed -n '/^rules:/,$$p' config/rbac/role.yaml > charts/slurm-operator/files/rules.yaml
	go run ./hack/chartschema config/crd/bases/slurm.hpc.dev_slurmclusters.yaml charts/helm-slurm-cluster/values.schema.json

.PHONY: check-generated
check-generated: generate manifests ## Fail when generated files differ from what is committed.
	@if ! git diff --quiet -- api config charts || [ -n "$$(git status --porcelain -- api config charts)" ]; then \
	  echo "generated files are stale; run 'make generate manifests' and commit:"; \
	  git --no-pager diff --stat -- api config charts; git status --porcelain -- api config charts; exit 1; fi

##@ Test

.PHONY: test-assets
test-assets: ## Build kube-apiserver and etcd for the tests (cached).
	hack/test-assets.sh >/dev/null

.PHONY: slurm-rootfs
slurm-rootfs: ## Build the Debian 13 root file system with Slurm 24.11 for the real-Slurm tests (cached).
	hack/slurm-rootfs.sh >/dev/null

.PHONY: node-assets
node-assets: test-assets ## Build the node's binaries: kubelet, containerd, runc, CNI, CoreDNS, BuildKit (cached).
	hack/node-assets.sh >/dev/null

.PHONY: images
images: node-assets ## Build every image with BuildKit on a debootstrap'd Debian 13 base (cached; needs root).
	hack/images.sh

.PHONY: test
test: check-generated lint test-assets slurm-rootfs node-assets ## Run every test: generated files, lint, unit, envtest, real Slurm, e2e, the node test.
	KUBEBUILDER_ASSETS="$$(hack/test-assets.sh --print-dir)" SLURM_ROOTFS="$$(hack/slurm-rootfs.sh --print-dir)" \
	  go test $(GO_TEST_FLAGS) $$(go list ./... | grep -v /test/node)
	$(MAKE) test-node

.PHONY: test-node
test-node: node-assets ## The node test: images, a real one-node Kubernetes, the chart, ssh, jobs (needs root).
	NODE_TEST=1 go test -count=1 -timeout 60m -v ./test/node/

.PHONY: test-slurm
test-slurm: slurm-rootfs ## Run only the real-Slurm tests (verbose).
	SLURM_ROOTFS="$$(hack/slurm-rootfs.sh --print-dir)" go test -count=1 -v ./test/slurm/ ./test/slurmharness/

.PHONY: test-unit
test-unit: ## Run the tests that need no API server.
	go test -short ./...

.PHONY: golden
golden: ## Regenerate the renderers' golden files.
	go test ./internal/render/... ./internal/gpu/... -update

FUZZTIME ?= 30s
.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (their seeds run in make test).
	@for pkg in $$(go list ./...); do \
		for target in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "$$pkg $$target"; \
			go test $$pkg -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) || exit 1; \
		done; \
	done

.PHONY: bench
bench: test-assets slurm-rootfs ## Run the benchmarks (render time and size, API writes per reconcile, scale-up to idle, the manager's API requests, scaling on the real node).
	KUBEBUILDER_ASSETS="$$(hack/test-assets.sh --print-dir)" go test -run '^$$' -bench . -benchtime 20x ./internal/render/ ./internal/controller/
	SLURM_ROOTFS="$$(hack/slurm-rootfs.sh --print-dir)" go test -run '^$$' -bench ScaleUpToIdle -benchtime 3x ./test/slurm/
	KUBEBUILDER_ASSETS="$$(hack/test-assets.sh --print-dir)" go run ./hack/bench/apiwrites $(APIWRITES_FLAGS)
	$(MAKE) bench-node

.PHONY: bench-node
bench-node: node-assets ## Scale up and down on the real node several times (needs root; NODE_BENCH_RUNS=5).
	NODE_TEST=1 go test -run '^$$' -bench ScaleOnARealNode -benchtime 1x -timeout 60m -v ./test/node/

.PHONY: bench-apiwrites
bench-apiwrites: test-assets ## Count the manager's own API requests per phase from an audit log (APIWRITES_FLAGS=-short for a quick look).
	KUBEBUILDER_ASSETS="$$(hack/test-assets.sh --print-dir)" go run ./hack/bench/apiwrites $(APIWRITES_FLAGS)

##@ Lint

.PHONY: lint
lint: $(STATICCHECK) ## gofmt, go vet and staticcheck.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	$(STATICCHECK) ./...

##@ Run

.PHONY: demo
demo: test-assets ## Start a local control plane, run the operator and apply a demo cluster (Ctrl-C stops).
	KUBEBUILDER_ASSETS="$$(hack/test-assets.sh --print-dir)" go run ./cmd/manager --local $(DEMO_FLAGS)

.PHONY: run
run: ## Run the manager against the current kubeconfig.
	go run ./cmd/manager

##@ Tools

$(CONTROLLER_GEN):
	mkdir -p $(TOOLS)
	GOBIN=$(TOOLS)/.gobin go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(TOOLS)/.gobin/controller-gen $@

$(STATICCHECK):
	mkdir -p $(TOOLS)
	GOBIN=$(TOOLS)/.gobin go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLS)/.gobin/staticcheck $@
