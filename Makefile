# rgit — build, run, test, bench, lint.
# `make run` starts a server on the embedded default store (./data);
# `make test` installs what the tests need and runs the whole suite.

GO      ?= go
TOOLS   := $(CURDIR)/.tools
BIN     := $(CURDIR)/bin
VERSITYGW   := $(TOOLS)/versitygw
STATICCHECK := $(TOOLS)/staticcheck
export RGIT_VERSITYGW := $(VERSITYGW)
export PATH := $(BIN):$(PATH)

# Packages with real concurrency run under the race detector. transport/node's
# end-to-end suite runs there on the file store only (RACE_SKIP): its S3
# half drives the same server code and doubles the slowest package of the
# race run. Of testkit/multiproc (real nodes as child processes, built
# without -race) only the harness runs there: one rolling restart under
# its concurrent push-and-fetch load (RACE_MULTIPROC). TestCapacity, the
# capacity model's fake-time measurement, runs in the plain test stage
# only: under -race it once crashed the race runtime itself (SIGSEGV in
# its StackDepot, 2026-12-06, not a race report), and the cluster code
# it drives runs under -race in the package's other tests.
RACE_PKGS := ./storage/refdb/... ./storage/objstore/... ./storage/packcache/... ./storage/repo/... ./storage/clonecache/... \
	./storage/pack/... ./storage/bitmap/... ./storage/walk/... ./storage/fsck/... ./storage/ttlcache/... \
	./actors/... ./cluster/... ./transport/... ./testkit/faultstore/... ./testkit/cluster/...
RACE_SKIP := -skip 'TestE2E/s3|TestCapacity$$'
RACE_MULTIPROC := -run 'TestClusterRollingRestartNoFailures' ./testkit/multiproc/
FUZZTIME  ?= 5s

.PHONY: all build image manifests run test test-unit test-race fuzz tools deps soak bench bench-smoke bench-refdb bench-engine bench-http bench-cluster bench-maintenance bench-api bench-load bench-cold bench-cold-open bench-memory bench-hostile bench-lfs bench-outage bench-web lint generate clean

all: build

# Build identity for `rgit version`, /metrics (rgit_build_info) and the
# start-up log. The date is the commit's, not the clock's, so that (with
# -trimpath) rebuilding a commit gives the same binary. Outside a git
# checkout these stay empty and transport/node/version falls back to Go's embedded
# build information.
GIT_VERSION := $(shell git describe --tags --always --dirty 2>/dev/null)
GIT_COMMIT  := $(shell git rev-parse HEAD 2>/dev/null)
GIT_DATE    := $(shell git log -1 --format=%cI 2>/dev/null)
VERSION_PKG := github.com/rgit/rgit/transport/node/version
LDFLAGS     := -X $(VERSION_PKG).version=$(GIT_VERSION) -X $(VERSION_PKG).commit=$(GIT_COMMIT) -X $(VERSION_PKG).date=$(GIT_DATE)

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/rgit ./cmd/rgit-admin

## image: an OCI image of rgit and rgit-admin (static binaries, CA bundle,
## non-root user, /cache volume) as a tarball for docker/podman load or
## crane push, built without a Docker daemon or base image. Two builds of
## one commit give the same digest (bin/image.digest).
IMAGE_TAG ?= rgit:$(or $(GIT_VERSION),devel)
IMAGE_TAR := $(BIN)/rgit-image.tar
IMAGE_REPO ?= ghcr.io/rgit/rgit
image:
	@mkdir -p $(BIN)/image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/image/ ./cmd/rgit ./cmd/rgit-admin
	$(GO) run ./cmd/rgit-image -bin $(BIN)/image -version '$(or $(GIT_VERSION),devel)' -revision '$(or $(GIT_COMMIT),unknown)' \
		-created '$(or $(GIT_DATE),1970-01-01T00:00:00Z)' -tag '$(IMAGE_TAG)' -o $(IMAGE_TAR) -layout $(BIN)/rgit-oci -digest-file $(BIN)/image.digest

## manifests: pin the digest `make image` wrote into deploy/*.yaml
## (IMAGE_REPO is where you pushed it: crane push bin/rgit-oci $(IMAGE_REPO)).
manifests:
	@test -s $(BIN)/image.digest || { echo "run make image first"; exit 1; }
	$(GO) run ./cmd/rgit-image pin -image '$(IMAGE_REPO)@'"$$(cat $(BIN)/image.digest)" deploy/rgit.yaml deploy/api.yaml

run: build
	$(BIN)/rgit serve

## test: everything, with the services the tests need installed first.
## The suite's output is go test's, read from -json (bin/test.json) by
## scripts/testsum, which ends the run with every skipped test and the
## counts ("tests: N passed, N failed, N skipped"; also bin/test-summary.txt).
test: tools deps build lint
	bash -o pipefail -c '$(GO) test -count=1 -timeout 45m -json ./... | tee $(BIN)/test.json | $(GO) run ./scripts/testsum -o $(BIN)/test-summary.txt'
	$(GO) test -count=1 -race -timeout 20m $(RACE_SKIP) $(RACE_PKGS)
	RGIT_MULTIPROC_ROUNDS=1 $(GO) test -count=1 -race -timeout 10m $(RACE_MULTIPROC)
	$(MAKE) fuzz
	$(MAKE) bench-smoke
	@echo "summary of the suite (bin/test-summary.txt):"; cat $(BIN)/test-summary.txt

## fuzz: run every fuzz target briefly (FUZZTIME each).
fuzz:
	@FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

tools: $(VERSITYGW) $(STATICCHECK)

$(VERSITYGW):
	@mkdir -p $(TOOLS)
	@echo "building versitygw (S3 test server) into $(TOOLS); the first build takes a few minutes"
	GOBIN=$(TOOLS) $(GO) install github.com/versity/versitygw/cmd/versitygw@v1.8.0

$(STATICCHECK):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

## deps: Debian packages used by the interop tests (skipped loudly if apt is unavailable).
deps:
	@bash scripts/deps.sh

## bench-smoke: every bench once, on the small fixture with tiny settings
## (seconds each, not figures): a bench that stops verifying its output, or
## breaks, fails `make test`.
SMOKE := $(BIN)/rgit-bench
bench-smoke: build
	$(GO) build -o $(SMOKE) ./cmd/rgit-bench
	$(SMOKE) engine -fixtures small -runs 1
	$(SMOKE) http -rgit $(BIN)/rgit -fixtures small -runs 1 -stores file -concurrency 2
	$(SMOKE) http -rgit $(BIN)/rgit -fixtures small -runs 1 -stores s3 -ops http-clone
	$(SMOKE) api -rgit $(BIN)/rgit -fixtures small -n 3 -rps-time 200ms
	$(SMOKE) cluster -rgit $(BIN)/rgit -fixtures small -runs 1 -claim-for 200ms -storm-repos 100 -renew-leases 100 -map-entries 10000
	$(SMOKE) maint -rgit $(BIN)/rgit -n 5 -runs 1
	$(SMOKE) load -rgit $(BIN)/rgit -fixtures small -clients 20 -duration 4s -repos 3 -rounds 2
	$(SMOKE) cold -fixtures small -runs 1 -latency 1ms
	$(SMOKE) cold-open -repos 20,40 -duration 1s -serial 5 -max-warm 8 -clients 4
	$(SMOKE) memory -rgit $(BIN)/rgit -fixtures small -idle 1s
	$(SMOKE) outage -duration 3s -op-timeout 1s -slow-delay 300ms
	$(SMOKE) hostile -rgit $(BIN)/rgit -quick -check
	$(SMOKE) lfs -rgit $(BIN)/rgit -objects 2 -mb 1 -rounds 1
	$(SMOKE) web -rgit $(BIN)/rgit -fixtures small -n 2 -warmup 1
	$(SMOKE) soak -rgit $(BIN)/rgit -duration 60s -interval 30s -hang 5s
	$(GO) run ./cmd/rgit-bench-refdb -stores mem-20ms -concurrency 1,8 -duration 300ms -open-commits 100

bench: build tools bench-refdb bench-engine bench-http bench-cluster bench-api bench-maintenance bench-load bench-cold bench-cold-open bench-memory bench-hostile bench-lfs bench-outage bench-web

bench-refdb:
	$(GO) run ./cmd/rgit-bench-refdb

bench-engine:
	$(GO) run ./cmd/rgit-bench engine

bench-http: build
	$(GO) run ./cmd/rgit-bench http

bench-cluster: build
	$(GO) run ./cmd/rgit-bench cluster

## bench-lfs: Git LFS uploads and downloads (5 × 20 MB, 3 rounds) through a
## node against presigned PUT/GET on versitygw and cp on the file store.
bench-lfs: build tools
	$(GO) run ./cmd/rgit-bench lfs

## bench-maintenance: 1,000 pushes to one repository (MAINT_N to change).
MAINT_N ?= 1000
bench-maintenance: build
	$(GO) run ./cmd/rgit-bench maint -n $(MAINT_N)

bench-api: build
	$(GO) run ./cmd/rgit-bench api

## bench-load: 200 clients for 60 s over 50 repositories, rgit and git
## http-backend (LOAD_ARGS to change, e.g. LOAD_ARGS="-clients 50 -duration 20s").
LOAD_ARGS ?=
bench-load: build
	$(GO) run ./cmd/rgit-bench load $(LOAD_ARGS)

## bench-cold: first clone from a node with an empty cache, store at 20 ms and 100 MB/s.
bench-cold:
	$(GO) run ./cmd/rgit-bench cold -fixtures medium,large

## bench-cold-open: 1,000 then 10,000 repositories on one node (RGIT_MAX_WARM=64),
## read at random over a store with 20 ms latency.
bench-cold-open:
	$(GO) run ./cmd/rgit-bench cold-open

## bench-memory: peak and idle RSS of a node over a push and a clone of the
## large and big fixtures (big is ~380 MB and takes half an hour to build once).
bench-memory: build
	$(GO) run ./cmd/rgit-bench memory

## bench-outage: the object store (versitygw) hangs (SIGSTOP), then refuses
## (killed), then answers every request after 2 s, for 60 s each under one
## node: reads served, push time to fail, store requests during the outage,
## time to recover.
bench-outage: tools
	$(GO) run ./cmd/rgit-bench outage -duration 60s

## soak: three nodes on versitygw (api-serve and Redis for the read API)
## under a mixed load for 20 minutes, one fault a minute in rotation (kill
## -9, SIGTERM, the store hanging 20 s, the leader restarted): a line a
## minute and a verdict (0 errors outside the faults, 0 acknowledged
## pushes lost, resources flat); fails when the verdict does
## (SOAK_ARGS="-duration 10m" to change). Not part of `make bench`.
SOAK_ARGS ?=
soak: build tools
	$(GO) run ./cmd/rgit-bench soak -duration 20m $(SOAK_ARGS)

## bench-hostile: a default node against hostile clients: a 10^6-path tree
## bomb through every read-API route and the web page, 64 slow clients
## holding connections during a real fetch, 4 concurrent delta-bomb pushes.
## Lines end in ok=true|false; HOSTILE_ARGS="-check" fails on any false,
## "-quick" is a smoke run of seconds.
HOSTILE_ARGS ?=
bench-hostile: build
	$(GO) run ./cmd/rgit-bench hostile $(HOSTILE_ARGS)

## bench-web: the browse page's views (repository, tree, file, commit,
## log, blame, branches, search) against cgit (CGI, cache off; `make deps`
## installs it) on the medium and large fixtures, p50 and p99 of 100
## requests a view; blame and search against git blame and git grep.
bench-web: build deps
	$(GO) run ./cmd/rgit-bench web

lint: $(STATICCHECK)
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	$(GO) vet ./...
	$(STATICCHECK) ./...

generate:
	$(GO) generate ./...

clean:
	rm -rf $(BIN)
