# edgeq developer commands. `make demo` runs the demo shop behind edgeq, with a crowd in line; `make test`
# runs every test; `make help` lists them all.
GO      ?= go
BIN     := bin
# The version make build and make release stamp into edgeq (`edgeq version`, edgeq_build_info): the tag
# when HEAD is one (v0.4.0), else the commit's short hash; -dirty when the tree has uncommitted
# changes. `make release VERSION=v0.4.0` sets it by hand.
VERSION ?= $(shell git describe --tags --exact-match --dirty 2>/dev/null || git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: help build demo test test-quick fuzz chaos bench lint golangci-lint clean screenshots licenses release version

# help lists the targets (the default: `make` alone prints this).
help:
	@echo "make build        the binaries in bin/ (edgeq, demoshop, edgeq-bench)"
	@echo "make demo         the demo shop with edgeq in front and CROWD shoppers in line (SHOP_LISTEN, EDGEQ_LISTEN,"
	@echo "                  ADMIN_LISTEN, CROWD=12, DEMO_CAPACITY=3; embedded store)"
	@echo "make test         every test, with the race detector (what CI runs; browsers, redis-server, PostgreSQL)"
	@echo "make test-quick   the edit-test loop: every package but the browser tests, without -race"
	@echo "make fuzz         every fuzz target for FUZZTIME each (default 10s)"
	@echo "make chaos        the chaos run for CHAOSTIME (default 5m): replicas, Redis and the shop broken at random"
	@echo "make lint         gofmt, go mod tidy -diff, go vet and golangci-lint (.golangci.yml; installed into bin/"
	@echo "                  at a pinned version)"
	@echo "make bench        the benchmarks (figures in docs/benchmarks.md)"
	@echo "make screenshots  retake docs/screenshots in headless Chromium"
	@echo "make licenses     THIRD_PARTY_LICENSES.md: the licences of every module the binaries link (after a go.mod change)"
	@echo "make release      static edgeq binaries for linux/amd64 and linux/arm64 as dist/*.tar.gz, and dist/SHA256SUMS"
	@echo "make version      the version make build and make release stamp (the git tag, else the commit)"
	@echo "make image        the container image, built here without a registry (podman): bin/edgeq-image.tar"
	@echo "make image-check  make image, then run it: version, check, a request through it to the demo shop"
	@echo "make clean        remove bin/ and dist/"

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/edgeq ./cmd/edgeq
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/demoshop ./cmd/demoshop
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/edgeq-bench ./cmd/edgeq-bench

# The demo shop on SHOP_LISTEN and edgeq in front of it on EDGEQ_LISTEN (both on loopback by default),
# with config.example.yaml and the embedded store (no Redis needed), and CROWD simulated shoppers
# (edgeq-bench crowd) in the drop queue, whose capacity is lowered to DEMO_CAPACITY for the demo only:
# a newcomer meets the waiting room on the first visit. CROWD=0: no crowd and the file's own capacity.
# Ctrl-C stops them all.
SHOP_LISTEN   ?= 127.0.0.1:3000
EDGEQ_LISTEN  ?= 127.0.0.1:8080
# The admin listener: EDGEQ_ADMIN_LISTEN when set in the environment (as edgeq itself would read it).
ADMIN_LISTEN  ?= $(or $(EDGEQ_ADMIN_LISTEN),127.0.0.1:9090)
CROWD         ?= 12
DEMO_CAPACITY ?= 3
CROWD_ON      := $(filter-out 0,$(CROWD))
# The queue as config.example.yaml has it (id, title) with room for DEMO_CAPACITY; the line keeps
# moving by itself: the place of a crowd no-show (it stops polling) goes to the next one gone_after
# (10 s) after its turn, and a visitor let in who never buys gives the place back when the token
# expires, within token_ttl.
DEMO_QUEUES    = [{id: drop, title: "Sneaker drop", capacity: $(DEMO_CAPACITY), token_ttl: 2m}]
DEMO_ENV       = EDGEQ_SERVER_LISTEN=$(EDGEQ_LISTEN) EDGEQ_ADMIN_LISTEN=$(ADMIN_LISTEN) EDGEQ_ORIGIN_URL=http://$(SHOP_LISTEN) \
	$(if $(CROWD_ON),EDGEQ_QUEUES='$(DEMO_QUEUES)')
# The dashboard and the report need an admin key: without one the admin API is off (404).
DEMO_DASHBOARD = http://$(ADMIN_LISTEN)/dashboard $(if $(EDGEQ_ADMIN_API_KEY),(the password is the value of EDGEQ_ADMIN_API_KEY),(off until EDGEQ_ADMIN_API_KEY is set: EDGEQ_ADMIN_API_KEY=demo-key make demo))
demo: build
	@$(DEMO_ENV) $(BIN)/edgeq check -config config.example.yaml
	@echo
	@echo "  shop through edgeq:  http://$(EDGEQ_LISTEN)/"
	@echo "  admin (metrics):     http://$(ADMIN_LISTEN)/metrics"
	@echo "  dashboard, report:   $(DEMO_DASHBOARD)"
	@echo "  (use 127.0.0.1 throughout: cookies are kept per host name, and localhost is another one)"
ifneq ($(CROWD_ON),)
	@echo "  in line:             $(CROWD) simulated shoppers (edgeq-bench crowd), room for $(DEMO_CAPACITY) inside:"
	@echo "                       open http://$(EDGEQ_LISTEN)/products/1 and wait your turn with them"
	@echo "  (CROWD=0 make demo: no crowd, and the queue's own capacity; edgeq logs warnings only while the"
	@echo "  crowd runs: EDGEQ_LOG_LEVEL=info make demo logs every request)"
else
	@echo "  in line:             nobody (CROWD=0): the queue has config.example.yaml's capacity"
endif
	@echo "  Ctrl-C stops them all."
	@echo
	@trap 'kill $$shop $$crowd 2>/dev/null' EXIT INT TERM; \
	$(BIN)/demoshop -listen $(SHOP_LISTEN) & shop=$$!; \
	$(if $(CROWD_ON),$(BIN)/edgeq-bench crowd -url http://$(EDGEQ_LISTEN) -queue drop -size $(CROWD) -sku jersey & crowd=$$!;) \
	$(DEMO_ENV) EDGEQ_LOG_FORMAT=$${EDGEQ_LOG_FORMAT:-text} $(if $(CROWD_ON),EDGEQ_LOG_LEVEL=$${EDGEQ_LOG_LEVEL:-warn}) \
	$(BIN)/edgeq serve -config config.example.yaml

# The full suite, with the race detector. Tests that run Lua use a private redis-server when one is
# installed (and the embedded store otherwise); browser tests need Chromium and e2e/node_modules (npm ci
# runs again when package-lock.json is newer than the installed modules; they
# are skipped without them). The browser tests run after every other package, not beside them: on a
# 2-CPU machine Chromium under the race detector starves the concurrency tests running next to it
# (late store answers, 503s), and runs past 20 minutes beside them; alone it has taken 22 minutes on a
# slow machine, hence its longer timeout. Every benchmark also runs once
# (-benchtime 1x, no figures kept), so that one which no longer runs fails here rather than at the
# next measurement. With CI set, anything missing fails instead.
test:
	@[ e2e/node_modules/.package-lock.json -nt e2e/package-lock.json ] || ! command -v npm >/dev/null || (cd e2e && npm ci --no-audit --no-fund --loglevel=error)
	$(GO) test -race -count=1 -timeout 30m $$($(GO) list ./... | grep -v '/e2e$$')
	$(GO) test -count=1 -timeout 10m -run '^$$' -bench . -benchtime 1x $$($(GO) list ./... | grep -v '/e2e$$')
	$(GO) test -race -count=1 -timeout 45m ./e2e/

# The edit-test loop: every package but the browser tests (e2e), without the race detector, each test
# once. Tests that need redis-server or PostgreSQL still use them (or the embedded store). CI runs
# `make test`, which is the one that decides.
test-quick:
	$(GO) test -count=1 -timeout 15m $$($(GO) list ./... | grep -v '/e2e$$')

# Fuzz every parser of visitor-controlled input for FUZZTIME each (CI runs this after `make test`).
# Plain `go test` already replays the committed corpora in testdata/fuzz; this searches for new inputs.
# A failure writes the input under testdata/fuzz/<target>/: commit it with the fix.
FUZZTIME ?= 10s
# Every func FuzzX in the module's tests (scripts/fuzztargets.sh): a new one is fuzzed without a list.
FUZZ_TARGETS = $(shell scripts/fuzztargets.sh)
# scripts/fuzz.sh tells a finding from Go 1.26's end-of-fuzztime coordinator race (golang/go#75804).
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		scripts/fuzz.sh $$pkg $$name $(FUZZTIME) $(GO); \
	done

# The standing chaos run (docs/reliability.md): three replicas, Redis with Sentinel, a recording shop
# and buyers under a nemesis for CHAOSTIME, then the invariants; exit 1 on a violated one (the seed is
# printed: CHAOSFLAGS="-seed N" repeats a run). CI runs it for 60s after the tests.
CHAOSTIME ?= 5m
CHAOSFLAGS ?=
chaos:
	$(GO) run ./cmd/edgeq-bench chaos -duration $(CHAOSTIME) -replicas 3 $(CHAOSFLAGS)

# Retake the screenshots in docs/screenshots (headless Chromium; see e2e/): the scenarios', and every
# shopper page state in en, ja and ar on desktop and phone in docs/screenshots/states.
screenshots:
	UPDATE_SCREENSHOTS=1 $(GO) test -count=1 -timeout 30m -run TestBrowser ./e2e/

# Pass-through overhead (origin direct, bare ReverseProxy, edgeq, measured in one run) and the waiting
# room on a private redis-server; the ledger on a private PostgreSQL.
# The side-by-side table (edgeq-bench table, plain and over TLS) needs wrk, and shows nginx and Caddy
# (each also terminating TLS) when installed:
# apt-get install wrk nginx caddy (Debian); without wrk it says so and stops. The hot product
# (edgeq-bench hot) needs wrk and redis-benchmark (redis-tools).
bench:
	$(GO) run ./cmd/edgeq-bench table
	$(GO) run ./cmd/edgeq-bench hot
	$(GO) run ./cmd/edgeq-bench bytes
	$(GO) test -run '^$$' -bench . -benchmem ./proxy/ ./waitroom/
	$(GO) test -run '^$$' -bench 'StockReserveAndCommit|BidPlace|IdleWorkerPass' ./admission/
	$(GO) test -run '^$$' -bench 'Report_' -benchtime 10x ./report/
	$(GO) run ./cmd/edgeq-bench overhead
	$(GO) run ./cmd/edgeq-bench waitroom -waiters 1000000
	$(GO) run ./cmd/edgeq-bench admission
	$(GO) run ./cmd/edgeq-bench replicas
	$(GO) run ./cmd/edgeq-bench replicas -delay 1ms
	$(GO) run ./cmd/edgeq-bench bid
	$(GO) run ./cmd/edgeq-bench ledger

# gofmt, go mod tidy, go vet and golangci-lint with the linters of .golangci.yml (errcheck, govet,
# ineffassign, nolintlint, staticcheck, unused, gosec, promlinter, sloglint, dupl; each exclusion
# there says why). staticcheck runs inside golangci-lint, with the checks the staticcheck command enables by
# default and the same staticcheck release (v0.8.2 in golangci-lint v2.15.0), so it is no longer
# installed on its own. `make golangci-lint` installs the pinned version into bin/ when missing.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
lint: golangci-lint
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...

golangci-lint: $(GOLANGCI_LINT)
$(GOLANGCI_LINT):
	@mkdir -p $(BIN)
	GOBIN=$(abspath $(BIN)) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	@mv $(BIN)/golangci-lint $(GOLANGCI_LINT)

# THIRD_PARTY_LICENSES.md: the Go standard library and every module linked into the commands under cmd/,
# with the text of their licence files from the module cache (scripts/licenses). Commit it; its test
# (go test ./scripts/licenses) fails when it is out of date with go.mod.
licenses:
	$(GO) run ./scripts/licenses -o THIRD_PARTY_LICENSES.md

# Static edgeq binaries (CGO_ENABLED=0, -trimpath, VERSION stamped) for RELEASE_PLATFORMS, each in
# dist/edgeq_$(VERSION)_<os>_<arch>.tar.gz beside LICENSE, THIRD_PARTY_LICENSES.md, README.md,
# CHANGELOG.md and config.example.yaml, and dist/SHA256SUMS (sha256sum -c reads it). The archives
# are reproducible: the same commit built by the same Go gives the same bytes (names sorted, owner
# root, times the commit's; GNU tar). A THIRD_PARTY_LICENSES.md out of date with go.mod stops it.
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64
RELEASE_FILES     := LICENSE THIRD_PARTY_LICENSES.md README.md CHANGELOG.md config.example.yaml
DIST              := dist
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
release:
	@rm -rf $(DIST) && mkdir -p $(DIST)
	@$(GO) run ./scripts/licenses -o $(DIST)/THIRD_PARTY_LICENSES.md
	@cmp -s $(DIST)/THIRD_PARTY_LICENSES.md THIRD_PARTY_LICENSES.md || \
		{ echo "THIRD_PARTY_LICENSES.md is out of date with go.mod: run make licenses and commit it"; exit 1; }
	@rm $(DIST)/THIRD_PARTY_LICENSES.md
	@set -e; for platform in $(RELEASE_PLATFORMS); do \
		os=$${platform%/*}; arch=$${platform#*/}; name=edgeq_$(VERSION)_$${os}_$${arch}; \
		echo "$(DIST)/$$name.tar.gz"; \
		mkdir -p $(DIST)/$$name; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(DIST)/$$name/edgeq ./cmd/edgeq; \
		cp $(RELEASE_FILES) $(DIST)/$$name/; \
		tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$(SOURCE_DATE_EPOCH) --mode=u+w,go-w,a+rX \
			-C $(DIST) -cf - $$name | gzip -9n > $(DIST)/$$name.tar.gz; \
		rm -rf $(DIST)/$$name; \
	done
	cd $(DIST) && sha256sum *.tar.gz > SHA256SUMS

version:
	@echo $(VERSION)

# The Dockerfile's image, assembled on this machine with podman and no registry (scripts/image.sh): the
# binary built here as the Dockerfile's build stage builds it, the CA bundle and time zones from this
# Debian machine (ca-certificates, tzdata), the final stage's instructions as they are. It is saved
# as IMAGE_ARCHIVE, tagged localhost/edgeq:$(VERSION) and :latest (docker load -i / podman load -i);
# podman's store is temporary. image-check loads it into another one and runs it (CI, before the tests).
IMAGE_ARCHIVE ?= $(BIN)/edgeq-image.tar
.PHONY: image image-check
image:
	GO=$(GO) VERSION=$(VERSION) scripts/image.sh build $(IMAGE_ARCHIVE)
image-check: image
	GO=$(GO) scripts/image.sh check $(IMAGE_ARCHIVE)

clean:
	rm -rf $(BIN) $(DIST)
