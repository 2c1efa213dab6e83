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

# Packages with real concurrency run under the race detector.
RACE_PKGS := ./storage/refdb/... ./storage/objstore/... ./storage/packcache/... ./storage/repo/... ./storage/clonecache/... ./actors/... ./cluster/... ./transport/... ./testkit/faultstore/... ./testkit/cluster/...
FUZZTIME  ?= 5s

.PHONY: all build run test test-unit test-race fuzz tools deps bench bench-refdb bench-engine bench-http bench-cluster bench-maintenance lint generate clean

all: build

# Build identity for `rgit version`, /metrics (rgit_build_info) and the
# start-up log. The date is the commit's, not the clock's, so that (with
# -trimpath) rebuilding a commit gives the same binary. Outside a git
# checkout these stay empty and cmd/version falls back to Go's embedded
# build information.
GIT_VERSION := $(shell git describe --tags --always --dirty 2>/dev/null)
GIT_COMMIT  := $(shell git rev-parse HEAD 2>/dev/null)
GIT_DATE    := $(shell git log -1 --format=%cI 2>/dev/null)
VERSION_PKG := github.com/rgit/rgit/cmd/version
LDFLAGS     := -X $(VERSION_PKG).version=$(GIT_VERSION) -X $(VERSION_PKG).commit=$(GIT_COMMIT) -X $(VERSION_PKG).date=$(GIT_DATE)

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/rgit ./cmd/rgit-admin

run: build
	$(BIN)/rgit serve

## test: everything, with the services the tests need installed first.
test: tools deps build lint
	$(GO) test -count=1 -timeout 20m ./...
	$(GO) test -count=1 -race -timeout 20m $(RACE_PKGS)
	$(MAKE) fuzz

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

bench: build tools bench-refdb bench-engine bench-http bench-cluster bench-maintenance

bench-refdb:
	$(GO) run ./cmd/rgit-bench-refdb

bench-engine:
	$(GO) run ./cmd/rgit-bench engine

bench-http: build
	$(GO) run ./cmd/rgit-bench http

bench-cluster: build
	$(GO) run ./cmd/rgit-bench cluster

## bench-maintenance: 1,000 pushes to one repository (MAINT_N to change).
MAINT_N ?= 1000
bench-maintenance: build
	$(GO) run ./cmd/rgit-bench maint -n $(MAINT_N)

lint: $(STATICCHECK)
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	$(GO) vet ./...
	$(STATICCHECK) ./...

generate:
	$(GO) generate ./...

clean:
	rm -rf $(BIN)
