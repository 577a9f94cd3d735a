# Metallo — see README.md. Two cores here: builds and tests use -p 2.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
GOFLAGS_TEST ?= -p 2 -count=1 -timeout 75m
CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/metallo
TOOLS := $(CACHE)/tools
SQLC_VERSION := v1.30.0
SQLC := $(TOOLS)/sqlc-$(SQLC_VERSION)/sqlc
GOLANGCI_VERSION := v2.15.0
GOLANGCI := $(TOOLS)/golangci-lint-$(GOLANGCI_VERSION)/golangci-lint
BIN := bin/metallo
# ROLES: roles with an OpenAPI document; SERVE_ROLES: what `make run` serves in one process.
ROLES := provisioning execution
SERVE_ROLES := provisioning,execution
# RUN_FLAGS: more flags for make run, such as --listen 127.0.0.1:18080 --admin-listen 127.0.0.1:19090.
RUN_FLAGS ?=
SERVE_FLAGS := --waldur-instance https://waldur.example.org --resource-owner in-process --environments-file var/environments.yaml
DEV_PRINCIPALS := site:alpha service:beto service:execution
REQUIRED_LANES := $(shell paste -sd, .ci/lanes)

.PHONY: all build run test test-unit generate generate-sqlc generate-openapi docs-assets lint bench bench-execution tools services clean

all: build

# The build's version (docs/operations.md#versions), stamped into platform/buildinfo with -ldflags -X
# from git when this is a checkout: `git describe` of the nearest v* tag (or the commit alone), with
# "+dirty" when the tree has uncommitted or untracked files (as go build counts them), the full
# revision and its commit time. go build stamps VCS data itself only where .git is a directory (not in
# a git worktree); -buildvcs=true overrides an environment's GOFLAGS=-buildvcs=false where it can.
# Outside a checkout nothing is linked and the binary says (devel) and unknown; METALLO_VERSION=…
# (e.g. make build METALLO_VERSION=v1.4.0) sets the version of any build.
BUILDINFO := github.com/pharos-metallo/metallo/platform/buildinfo
GIT_REVISION = $(shell git rev-parse --verify --quiet HEAD 2>/dev/null)
GIT_MODIFIED = $(if $(shell git status --porcelain 2>/dev/null | head -c1),true,false)
GIT_TIME = $(shell TZ=UTC git show -s --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD 2>/dev/null)
GIT_VERSION = $(shell git describe --tags --always --abbrev=12 --match 'v[0-9]*' HEAD 2>/dev/null)$(if $(filter true,$(GIT_MODIFIED)),+dirty)
METALLO_VERSION ?= $(if $(GIT_REVISION),$(GIT_VERSION))
LDFLAGS_VERSION = $(if $(METALLO_VERSION),-X $(BUILDINFO).version=$(METALLO_VERSION)) \
	$(if $(GIT_REVISION),-X $(BUILDINFO).revision=$(GIT_REVISION) -X $(BUILDINFO).vcsTime=$(GIT_TIME) -X $(BUILDINFO).modified=$(GIT_MODIFIED))

build:
	$(GO) build -buildvcs=true -ldflags '$(strip $(LDFLAGS_VERSION))' -o $(BIN) ./app/cmd/metallo

## run: serve the central roles on their embedded default SQLite databases under ./var/
run: build
	@mkdir -p var
	@if [ ! -f var/keys.yaml ]; then \
	  for p in $(DEV_PRINCIPALS); do $(BIN) keys new --principal $$p --append var/keys.yaml | sed -n "s/^key: /$$p /p"; done > var/dev-keys.txt; \
	  echo "wrote var/keys.yaml; the development keys are in var/dev-keys.txt"; \
	fi
	@if [ ! -f var/environments.yaml ]; then \
	  out=$$($(BIN) keys new --principal environment:alpha-k8s); \
	  printf 'environments:\n  - id: alpha-k8s\n    site: alpha\n    authority: http://127.0.0.1:8080\n    backend: kubernetes\n    auth:\n      key_sha256: %s\n' "$$(echo "$$out" | sed -n 's/.*sha256: //p')" > var/environments.yaml; \
	  echo "$$out" | sed -n 's/^key: /environment:alpha-k8s /p' >> var/dev-keys.txt; \
	  echo "wrote var/environments.yaml (environment alpha-k8s at site alpha); its Runtime key is in var/dev-keys.txt"; \
	fi
	$(BIN) serve --role $(SERVE_ROLES) --keys-file var/keys.yaml --migrate --log-format console $(SERVE_FLAGS) $(RUN_FLAGS)

## test: every lane (unit, SQLite, PostgreSQL, Kubernetes, Git host, Slurm, and a short fuzz pass); fails when a lane runs no test or skips one
test: services git-tools browser-tools githost-build cluster-up slurm-up
	@mkdir -p var
	$(GO) vet ./...
	@unformatted=$$(gofmt -l app contexts platform sql systemtest standins deploy/policytest deploy/demo 2>/dev/null); if [ -n "$$unformatted" ]; then echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; fi
	$(GO) build -o var/lanecheck ./app/cmd/lanecheck
	status=0; $(GO) test -json $(GOFLAGS_TEST) ./... > var/test-report.json || status=$$?; \
	(cd deploy/localcluster && $(GO) test -json ./internal/...) >> var/test-report.json || status=$$?; \
	for target in $(FUZZ_TARGETS_TEST); do \
	  $(GO) test -json -run '^$$' -fuzz "^$${target#*:}$$" -fuzztime $(FUZZTIME_TEST) -fuzzminimizetime $(FUZZMINIMIZETIME) -parallel 2 ./$${target%%:*} >> var/test-report.json || status=1; \
	done; \
	var/lanecheck -quiet -require $(REQUIRED_LANES) -file var/test-report.json && exit $$status

# --- fuzzing (docs/testing.md#fuzzing) ---
# Every decoder an outsider reaches, as <package>:<target>; each has a
# committed seed corpus in <package>/testdata/fuzz/<target>/ that every
# `go test` replays. `make fuzz` fuzzes each for FUZZTIME; `make test` for
# FUZZTIME_TEST (the fuzz lane). A failing input is written to the
# package's testdata/fuzz/<target>/: commit it with the fix.
FUZZ_TARGETS := platform/ijson:FuzzCheck \
	platform/siteprotocol:FuzzParseAppend platform/siteprotocol:FuzzParsePulled platform/siteprotocol:FuzzParseResult \
	contexts/resourceprovisioning/adaptors/httpapi:FuzzReportBody contexts/resourceprovisioning/adaptors/httpapi:FuzzBetoEventBody \
	contexts/resourceprovisioning/adaptors/httpapi:FuzzAccountsBody \
	contexts/resourceprovisioning/adaptors/waldur:FuzzMapping \
	contexts/executionports:FuzzExecutionBodies \
	platform/environments:FuzzParse platform/auth:FuzzParseKeys
# FUZZ_TARGETS_TEST: the targets of make test's short pass (all by default).
FUZZ_TARGETS_TEST ?= $(FUZZ_TARGETS)
FUZZTIME ?= 60s
# A count, not a duration: Go 1.26's fuzz coordinator can fail a target with a bare
# "context deadline exceeded" when a duration ends while a worker runs (golang/go#75804,
# fixed in Go 1.27); a count has no deadline to race.
FUZZTIME_TEST ?= 2000x
FUZZMINIMIZETIME ?= 5s

.PHONY: fuzz
## fuzz: fuzz every decoder an outsider reaches for FUZZTIME each (default 60s; e.g. make fuzz FUZZTIME=10m)
fuzz:
	@for target in $(FUZZ_TARGETS); do \
	  echo "fuzz $${target%%:*} $${target#*:} for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$${target#*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) ./$${target%%:*} || exit 1; \
	done
# --- end fuzzing ---

## services: make sure the local PostgreSQL server answers (machines of this kind have it installed)
services:
	@if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then \
	  echo "starting the local PostgreSQL server"; \
	  if ! command -v pg_ctlcluster >/dev/null; then sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; $$sudo apt-get install -y postgresql; fi; \
	  pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql | head -1) main start; \
	  for i in $$(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done; \
	fi
	@pg_isready -h 127.0.0.1 -p 5432

## git-tools: git and git-lfs (metallo workspace-init and the Git host lane need both; Debian packages)
.PHONY: git-tools githost-build
git-tools:
	@if ! command -v git >/dev/null || ! git lfs version >/dev/null 2>&1; then \
	  echo "installing git and git-lfs"; sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq git git-lfs; \
	fi
	@git lfs version

## browser-tools: Debian's chromium (the browser lane renders /docs headless without network; docs/testing.md#the-browser-lane)
.PHONY: browser-tools
browser-tools:
	@if ! command -v chromium >/dev/null; then \
	  echo "installing chromium"; sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq chromium; \
	fi
	@chromium --version

## githost-build: build the tests' Git host (Gitea, deploy/githost) into ~/.cache/metallo/githost, keyed by its go.mod and go.sum
githost-build:
	@bash deploy/githost/githost.sh build >/dev/null

## generate: sqlc queries and the OpenAPI documents (committed; CI fails on drift)
generate: generate-sqlc generate-openapi

generate-sqlc: $(SQLC)
	$(SQLC) generate

## docs-assets: refresh /docs's renderer, the npm package @stoplight/elements at the version pinned in
## platform/httpserver/docs.go (committed under platform/httpserver/docsassets; its test checks the SRI hashes)
ELEMENTS_VERSION = $(shell sed -n 's/^const ElementsVersion = "\(.*\)"/\1/p' platform/httpserver/docs.go)
docs-assets:
	@set -e; d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	  (cd "$$d" && npm pack --silent @stoplight/elements@$(ELEMENTS_VERSION) >/dev/null && tar xzf stoplight-elements-$(ELEMENTS_VERSION).tgz); \
	  out=platform/httpserver/docsassets/stoplight-elements-$(ELEMENTS_VERSION); mkdir -p "$$out"; \
	  for f in web-components.min.js styles.min.css LICENSE web-components.min.js.LICENSE.txt; do cp "$$d/package/$$f" "$$out/$$f"; done
	$(GO) test -count=1 -run TestDocsAndEveryAssetItNamesAreServedByTheBinary ./platform/httpserver/

generate-openapi:
	@for role in $(ROLES); do $(GO) run ./app/cmd/metallo openapi --role $$role > openapi/$$role.yaml.tmp && mv openapi/$$role.yaml.tmp openapi/$$role.yaml; done

$(SQLC):
	@mkdir -p $(dir $@)
	GOBIN=$(dir $@) $(GO) install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION)

$(GOLANGCI):
	@mkdir -p $(dir $@)
	GOBIN=$(dir $@) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)

tools: $(SQLC)

lint: $(GOLANGCI)
	$(GO) vet ./...
	$(GOLANGCI) run ./...
	cd deploy/localcluster && $(GOLANGCI) run --config ../../.golangci.yml ./...
	cd deploy/localcluster/kserve && $(GOLANGCI) run --config ../../../.golangci.yml ./...

## bench: benchmarks with same-run baselines; results go to BENCHMARKS.md
bench: services build bench-execution bench-runtime
	@echo "see BENCHMARKS.md for what each benchmark measures"

## bench-execution: stream appends/s and acknowledgements/s over HTTP on PostgreSQL (8 appenders) next to the same statements issued with pgx; plans/s and p99 with 10,000 allocations next to the owner's indexed read
bench-execution: services
	$(GO) test -run '^$$' -bench 'BenchmarkStreamAppendAck' -benchtime=1x -count=1 -timeout 30m ./contexts/executionports/
	$(GO) test -run '^$$' -bench 'BenchmarkPlanning' -benchtime=1x -count=1 -timeout 30m ./app/

## bench-runtime: Site Runtime delivery (pull → journal → no-op executor → acknowledgement) on loopback next to raw durable SQLite commits/s on the same disk; prints the table for BENCHMARKS.md ("Runtime delivery") and keeps it in var/bench-runtime.md
.PHONY: bench-runtime
bench-runtime:
	@mkdir -p var
	$(GO) run ./systemtest/benchruntime | tee var/bench-runtime.md

clean:
	rm -rf bin var/test-report.json var/lanecheck

# --- resource_provisioning benchmark ---
## bench-provisioning: agent reports/s into provisioning over HTTP on PostgreSQL (32 agents) next to the same transactions issued with pgx; writes the "Report intake" section of BENCHMARKS.md (also kept in var/bench-provisioning.md)
.PHONY: bench-provisioning
bench: bench-provisioning
bench-provisioning: services
	@mkdir -p var
	METALLO_BENCH_REPORT=$(CURDIR)/var/bench-provisioning.md $(GO) test -run '^$$' -bench '^BenchmarkReportIntake$$' -benchtime=1x -count=1 -timeout 30m ./contexts/resourceprovisioning/
	@touch BENCHMARKS.md
	@awk -v f=var/bench-provisioning.md 'BEGIN { while ((getline l < f) > 0) s = s l "\n" } /^## Report intake$$/ { printf "%s", s; skip = 1; done = 1; next } /^## / { if (skip) print ""; skip = 0 } !skip { print } END { if (!done) printf "%s%s", (NR ? "\n" : ""), s }' BENCHMARKS.md > var/BENCHMARKS.md.tmp && mv var/BENCHMARKS.md.tmp BENCHMARKS.md
	@echo "wrote the Report intake section of BENCHMARKS.md"

## bench-provisioning-accounts: agents' account reports/s into provisioning over HTTP on PostgreSQL (32 agents, 4 member accounts each) next to the same transactions issued with pgx; writes the "Account reports" section of BENCHMARKS.md (also kept in var/bench-provisioning-accounts.md)
.PHONY: bench-provisioning-accounts
bench: bench-provisioning-accounts
bench-provisioning-accounts: services
	@mkdir -p var
	METALLO_BENCH_REPORT=$(CURDIR)/var/bench-provisioning-accounts.md $(GO) test -run '^$$' -bench '^BenchmarkAccountReports$$' -benchtime=1x -count=1 -timeout 30m ./contexts/resourceprovisioning/
	$(call bench_section,var/bench-provisioning-accounts.md,Account reports)

# bench_section replaces (or appends) the section "## $(2)" of BENCHMARKS.md with the file $(1).
define bench_section
@touch BENCHMARKS.md
@awk -v f=$(1) 'BEGIN { while ((getline l < f) > 0) s = s l "\n" } /^## $(2)$$/ { printf "%s", s; skip = 1; done = 1; next } /^## / { if (skip) print ""; skip = 0 } !skip { print } END { if (!done) printf "%s%s", (NR ? "\n" : ""), s }' BENCHMARKS.md > var/BENCHMARKS.md.tmp && mv var/BENCHMARKS.md.tmp BENCHMARKS.md
@echo "wrote the $(2) section of BENCHMARKS.md"
endef
# --- end resource_provisioning benchmark ---

# --- batch on Kubernetes: the demo and the native start benchmark (issue 6) ---
## demo: the main job end to end on the local cluster, narrated: central roles and a Runtime as processes, a private repository checked out by the helper Pod, a Job created as the member (deploy/demo); METALLO_DEMO_RUNTIME=pod runs the Runtime as a Pod installed from deploy/runtime
.PHONY: demo demo-check bench-native
demo: demo-check build services git-tools githost-build cluster-up
	$(GO) run ./deploy/demo --metallo $(BIN)

# demo-check refuses a bad METALLO_DEMO_RUNTIME before anything is built or started.
demo-check:
	@case "$${METALLO_DEMO_RUNTIME:-process}" in process|pod) ;; *) echo "METALLO_DEMO_RUNTIME must be process or pod, not '$$METALLO_DEMO_RUNTIME'" >&2; exit 2;; esac

## bench-native: batch Attempts started/s against the local cluster next to raw client-go Job creates/s, application Attempts started/s next to raw Deployment+Service creates/s, and inference Attempts started/s next to raw InferenceService creates/s; writes the "Native start", "Application start" and "Inference start" sections of BENCHMARKS.md (also kept in var/bench-native.md, var/bench-application.md, var/bench-inference.md)
bench: bench-native
bench-native: cluster-up
	@mkdir -p var
	METALLO_BENCH_REPORT=$(CURDIR)/var/bench-native.md METALLO_BENCH_APP_REPORT=$(CURDIR)/var/bench-application.md METALLO_BENCH_INFERENCE_REPORT=$(CURDIR)/var/bench-inference.md $(GO) test -run '^$$' -bench '^Benchmark(NativeStart|ApplicationStart|InferenceStart)$$' -benchtime=1x -count=1 -timeout 45m ./contexts/siteruntime/adaptors/kube/
	@touch BENCHMARKS.md
	@for pair in "var/bench-native.md:Native start" "var/bench-application.md:Application start" "var/bench-inference.md:Inference start"; do \
	  f=$${pair%%:*}; title=$${pair#*:}; \
	  awk -v f="$$f" -v title="## $$title" 'BEGIN { while ((getline l < f) > 0) s = s l "\n" } $$0 == title { printf "%s", s; skip = 1; done = 1; next } /^## / { if (skip) print ""; skip = 0 } !skip { print } END { if (!done) printf "%s%s", (NR ? "\n" : ""), s }' BENCHMARKS.md > var/BENCHMARKS.md.tmp && mv var/BENCHMARKS.md.tmp BENCHMARKS.md; \
	  echo "wrote the $$title section of BENCHMARKS.md"; \
	done
# --- end batch on Kubernetes ---

# --- local cluster (deploy/localcluster) ---
# A real kube-apiserver, kube-controller-manager, kube-scheduler and etcd built from the
# Kubernetes sources, with KWOK's fake Nodes and a hostPath volume provisioner, on loopback.
# With KServe's own InferenceService controller and webhooks (deploy/localcluster/kserve).
# Built once into $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/metallo/localcluster/<k8s version>-<go.sum hash>
# (a cold build takes 20-35 minutes on 2 cores and 8 GiB of free disk); state in var/localcluster
# (METALLO_CLUSTER_DIR). See deploy/localcluster/README.md.
.PHONY: cluster-up cluster-down cluster-status cluster-build image

## cluster-up: start the local cluster, or reuse the healthy one already running
cluster-up:
	@bash deploy/localcluster/cluster.sh up

## cluster-down: stop every process of the local cluster
cluster-down:
	@bash deploy/localcluster/cluster.sh down

## cluster-status: exit 0 when the local cluster is up and healthy
cluster-status:
	@bash deploy/localcluster/cluster.sh status

## cluster-build: build the local cluster's binaries into the cache, start nothing
cluster-build:
	@bash deploy/localcluster/cluster.sh build

## image: build the real node's images (pause, platform, Runtime, HTTP service; deploy/images) into the cache; a running cluster imports them
image:
	@bash deploy/localcluster/cluster.sh image
# --- end local cluster ---

# --- Slurm (deploy/slurm) ---
# One node of Debian's Slurm 22.05 on this machine: munged, slurmdbd on the machine's MariaDB,
# slurmctld, slurmd and slurmrestd (JWT, 127.0.0.1:6820); state in var/slurm (METALLO_SLURM_DIR).
# The ports 6817-6820 are fixed: one cluster per machine, under a machine-wide lock. See
# deploy/slurm/README.md.
.PHONY: slurm-up slurm-down slurm-status

## slurm-up: install Debian's Slurm packages when missing and start the Slurm cluster, or reuse the healthy one already running
slurm-up:
	@bash deploy/slurm/slurm.sh up

## slurm-down: stop every process of the Slurm cluster and remove its test users and database
slurm-down:
	@bash deploy/slurm/slurm.sh down

## slurm-status: exit 0 when the Slurm cluster is up and healthy
slurm-status:
	@bash deploy/slurm/slurm.sh status
# --- end Slurm ---
