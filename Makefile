# xk6-regime: build, test, benchmark, demo. `make help` lists the targets.
SHELL := /bin/bash
GO    ?= go
K6    := ./k6
CORPUS ?= ../shared/corpus/jmh
PROFILE ?= short
# the oldest Go that builds the extension: k6 v2.2.0's go directive
GO_MIN := 1.25.0

# pinned test tools, installed by `make tools` with go install into .cache/tools
ACTIONLINT_VERSION  := v1.7.12
KUBECONFORM_VERSION := v0.8.0
TOOLS       := .cache/tools
ACTIONLINT  := $(TOOLS)/actionlint-$(ACTIONLINT_VERSION)
KUBECONFORM := $(TOOLS)/kubeconform-$(KUBECONFORM_VERSION)

.DEFAULT_GOAL := help

# need TOOL,HINT: stop with a clear message when TOOL is not on PATH
need = @command -v $(1) >/dev/null 2>&1 || { echo "make: '$(1)' not found: $(2)" >&2; exit 127; }
NEED_GO = $(call need,$(GO),install Go $(GO_MIN) or later (https://go.dev/dl/) or set GO=/path/to/go)

# gobuild MODULE_DIR,PACKAGE,OUTPUT: go build into a temporary file next to
# OUTPUT and rename it, so that a failed or interrupted build leaves OUTPUT as
# it was (never a half-written or empty binary)
define gobuild
	$(NEED_GO)
	@mkdir -p $(dir $(3))
	@tmp="$(abspath $(dir $(3)))/.$(notdir $(3)).tmp.$$$$"; \
	trap 'rm -f "$$tmp"' EXIT; \
	echo "go build -o $(3) $(2)$(if $(filter-out .,$(1)), (in $(1)/))"; \
	if ! (cd $(1) && $(GO) build -o "$$tmp" $(2)); then \
	  echo "make: building $(2) failed; $(3) left as it was" >&2; exit 1; \
	fi; \
	mv -f "$$tmp" $(3)
endef

## help: list the targets
.PHONY: help
help:
	@grep -E '^## ' $(MAKEFILE_LIST) | sed -e 's/^## //' | awk '{i = index($$0, ": "); printf "  %-14s %s\n", substr($$0, 1, i - 1), substr($$0, i + 2)}'

## build: build ./k6 (k6 v2.2.0 with the extension) with a plain go build
.PHONY: build
build:
	$(call gobuild,.,./cmd/k6,$(K6))

## build-stock: build ./k6-stock, the same k6 without the extension (bench baseline)
.PHONY: build-stock
build-stock:
	$(call gobuild,.,./cmd/k6-stock,./k6-stock)

## build-demo: build ./bin/demo-service, the demo game-challenge service (Go module demo/)
.PHONY: build-demo
build-demo:
	$(call gobuild,demo,./cmd/demo-service,./bin/demo-service)

## deps: install what the tests need on a fresh machine (Debian packages as root, InfluxDB, the pinned tools, Apache Otava from PyPI into .cache/otava)
.PHONY: deps
deps:
	$(NEED_GO)
	@GO=$(GO) ./scripts/deps.sh

## tools: install the pinned actionlint and kubeconform into .cache/tools (go install)
.PHONY: tools
tools: $(ACTIONLINT) $(KUBECONFORM)

# go install TOOL@VERSION into a private GOBIN, then rename to the versioned
# name: an interrupted install leaves no file under that name
$(ACTIONLINT):
	$(NEED_GO)
	@mkdir -p $(TOOLS)/gobin
	GOBIN=$(CURDIR)/$(TOOLS)/gobin $(GO) install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION) || \
	  { echo "make: installing actionlint $(ACTIONLINT_VERSION) failed (needs the Go module proxy)" >&2; exit 1; }
	mv -f $(TOOLS)/gobin/actionlint $@

$(KUBECONFORM):
	$(NEED_GO)
	@mkdir -p $(TOOLS)/gobin
	GOBIN=$(CURDIR)/$(TOOLS)/gobin $(GO) install github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION) || \
	  { echo "make: installing kubeconform $(KUBECONFORM_VERSION) failed (needs the Go module proxy)" >&2; exit 1; }
	mv -f $(TOOLS)/gobin/kubeconform $@

## vet: gofmt check and go vet (both Go modules)
.PHONY: vet
vet:
	$(NEED_GO)
	@files=$$(git ls-files '*.go') && [ -n "$$files" ] || { echo "make vet: git ls-files found no Go file" >&2; exit 1; }; \
	out=$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$files) || { echo "make vet: gofmt failed" >&2; exit 1; }; \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags purego ./detector/
	GOARCH=arm64 $(GO) vet ./detector/
	cd demo && $(GO) vet ./...

# packages that start real processes (k6, the demo service, PostgreSQL, InfluxDB, Chromium):
# run one package at a time, so that they do not starve each other of the 2 cores
E2E_PKGS := ./test/...
# the detector is single-goroutine code: its tests (the JMH corpus, PELT) run
# without -race, which makes them several times slower; the packages that
# call it from goroutines (the engine, the JS module, detect) run with it
UNIT_PKGS = $(shell $(GO) list ./... | grep -v '/test/' | grep -v '/detector$$')

## test: make deps (quick when all is installed; Debian packages need root: without root it warns, and fails only when CI is set; the tests of PostgreSQL, Chromium, Apache Otava and the corpus then skip, while node, gcc and shellcheck stay required), vet, build k6 and the demo service, the thresholds helper's unit tests (node --test), unit tests with -race (both modules; the detector's without it, with the JMH corpus checks), an hour of samples through the run engine's ingest (internal/engine) without -race (heap bound), every fuzz target for 3 s (make fuzz for longer), then end-to-end tests (real k6, PostgreSQL, InfluxDB, Apache Otava, actionlint, kubeconform, the short live harness) one package at a time
.PHONY: test
# deps first, then the rest (as prerequisites, make -j would run deps's own
# make tools beside this one's)
test:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory vet build build-demo tools
	node --test thresholds/index.test.mjs
	$(GO) test -race -count=1 -timeout 15m $(UNIT_PKGS)
	cd demo && $(GO) test -race -count=1 -timeout 10m ./...
	set -o pipefail; $(GO) test -count=1 -timeout 10m -v ./detector/ | grep -v -E '^(=== (RUN|PAUSE|CONT)|--- PASS|    --- PASS)'
	set -o pipefail; $(GO) test -count=1 -timeout 5m -run '^TestIngestHourFlat$$' -v ./internal/engine/ | grep -E '^(---|ok|FAIL|    soak_test)'
	GO=$(GO) FUZZTIME=3s ./scripts/fuzz.sh
	K6_BIN=$(CURDIR)/k6 DEMO_BIN=$(CURDIR)/bin/demo-service \
	  ACTIONLINT_BIN=$(CURDIR)/$(ACTIONLINT) KUBECONFORM_BIN=$(CURDIR)/$(KUBECONFORM) \
	  $(GO) test -race -count=1 -p 1 -timeout 20m $(E2E_PKGS)

## prebuild: compile what make test builds (k6, the demo, the unit and end-to-end test binaries, the fuzz targets' instrumented builds) into the Go build cache without running anything; needs no Debian package but gcc (for -race), so CI runs it beside make deps
.PHONY: prebuild
prebuild: build build-demo
	@dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	set -x; \
	mkdir -p "$$dir/unit" "$$dir/e2e" && \
	$(GO) test -race -c -o "$$dir/unit" $(UNIT_PKGS) && \
	$(GO) test -race -c -o "$$dir/e2e" $(E2E_PKGS) && \
	$(GO) test -c -o "$$dir" ./detector/ ./internal/engine/ && \
	(cd demo && $(GO) test -race -c -o "$$dir" ./...) && \
	GO=$(GO) ./scripts/fuzz.sh --build "$$dir"

## test-short: the fast unit tests only
.PHONY: test-short
test-short:
	$(NEED_GO)
	$(GO) test -short -count=1 . ./detector/... ./extension/... ./internal/...

## fuzz: run every Go fuzz target for FUZZTIME each (default 60s); failing inputs land in testdata/fuzz/ (commit them)
FUZZTIME ?= 60s
.PHONY: fuzz
fuzz:
	$(NEED_GO)
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

## bench: Go benchmarks (-benchmem) of the detector and the run engine's per-sample path (internal/engine), then paired stock-vs-extension k6 runs
.PHONY: bench
bench: build build-stock
	$(GO) test -run '^$$' -bench . -benchmem ./detector/... ./internal/engine/...
	$(GO) run ./tools/k6bench -stock ./k6-stock -k6 $(K6) -pairs 6 -duration 4s

## soak: k6 with and without the extension, SOAK_DURATION (default 30m) each at SOAK_RATE (10000) empty iterations/s, RSS sampled, then the slopes and the difference; the extension's results folder in .cache/soak-results, its size and report.html's draw time in Chromium
SOAK_DURATION ?= 30m
SOAK_RATE ?= 10000
.PHONY: soak soak-short
soak: build build-stock
	mkdir -p .cache
	$(GO) run ./tools/k6soak -stock ./k6-stock -k6 $(K6) -duration $(SOAK_DURATION) -rate $(SOAK_RATE) -csv .cache/soak.csv -results .cache/soak-results

## soak-short: the same for 2 minutes each, a quick check
soak-short:
	$(MAKE) soak SOAK_DURATION=2m

## accuracy: run `k6 x regime detect` over the JMH corpus and score it beside the reference techniques
.PHONY: accuracy
accuracy: build
	@if [ ! -d "$(CORPUS)/series" ]; then echo "accuracy: corpus not found at $(CORPUS); skipped"; exit 0; fi; \
	mkdir -p .cache && \
	$(K6) x regime detect --group fork --column seconds_per_op $(CORPUS)/series/*.csv.gz > .cache/accuracy.jsonl && \
	$(GO) run ./tools/accuracy -corpus $(CORPUS) -detect-output .cache/accuracy.jsonl

## live: the live tag-quality harness (real Go, Node, JVM, CPython, CPython + PostgreSQL, CPython + SQLite, PyPy, demo, demo + PostgreSQL, cache, slowdown, drift, step, stall and slow-path services driven by ./k6, some on a busy machine or at 200 requests/s, judged against the consensus of the repeated runs (and each run against that of the others, the leave-one-out reference, printed beside it); LIVE_RUNS=5, LIVE_CASES=all (35 cases), about 4.5 h; LIVE_CASES=unseen: the last three held-out services, open and closed, about 40 min; LIVE_CASES=long: three cases at 5 minutes, about 1.4 h)
LIVE_RUNS ?= 5
LIVE_CASES ?= all
.PHONY: live
# the harness runs as a binary of its own, not under go run: go run does not
# pass a SIGTERM on, and the harness must get it to stop its services and k6
LIVE_BIN := .cache/bin/live
## live-bin: build the live harness binary into .cache/bin/live (make live builds it first)
.PHONY: live-bin
live-bin:
	$(NEED_GO)
	@mkdir -p .cache/bin
	$(GO) build -o $(LIVE_BIN) ./live/cmd/live

live: build build-demo live-bin
	$(LIVE_BIN) -runs $(LIVE_RUNS) -cases $(LIVE_CASES)

## live-profile: the harness with profiles (LIVE_RUNS runs of the flat control, Node, two HotSpot mixes and the demo on PostgreSQL; a profile learnt from each case's runs; as many runs again with it; about 1.5 h)
LIVE_PROFILE_CASES ?= go-io/open,node/open,jvm-sha/open,jvm-mixed/open,demo-pg/open
.PHONY: live-profile
live-profile: build build-demo live-bin
	$(LIVE_BIN) -runs $(LIVE_RUNS) -cases $(LIVE_PROFILE_CASES) -profile

## live-short: the short form of the harness (the go-io flat control and the demo service's pool warm-up, 60 s each): the cases of make test's TestShortLive, which asserts their gate and relapse checks (the flat control's only when the run's own reference finds it flat) and only prints those judged against the run's own reference and the settled view's; this target fails on any
.PHONY: live-short
live-short: build build-demo live-bin
	$(LIVE_BIN) -runs 1 -cases short

## demo: build, start the demo service on 127.0.0.1, run scenarios/combined.js (PROFILE=short), write results/, stop
.PHONY: demo
demo: build build-demo
	$(call need,curl,install curl (Debian: apt-get install -y curl))
	@./scripts/demo.sh

## compare-schedule: like demo, with scenarios/schedule-vs-measured.js; one gate judged on schedule tags (a cut at CUT=10s) and on measured tags
.PHONY: compare-schedule
compare-schedule: build build-demo
	$(call need,curl,install curl (Debian: apt-get install -y curl))
	@SCRIPT=scenarios/schedule-vs-measured.js ./scripts/demo.sh

## up: start the live stack (InfluxDB, Grafana, demo service + PostgreSQL, k6 with both outputs); needs a Docker engine
.PHONY: up
up:
	$(call need,docker,install Docker with the compose plugin)
	K6_UID=$$(id -u) GRAFANA_ADMIN_PASSWORD=$${GRAFANA_ADMIN_PASSWORD:-change-me} docker compose up -d --build

## down: stop the live stack and remove its volumes
.PHONY: down
down:
	$(call need,docker,install Docker with the compose plugin)
	docker compose down -v

## clean: remove built binaries and caches (results/ and the live harness's recorded runs, .cache/live, are kept)
.PHONY: clean
clean:
	rm -rf $(K6) ./k6-stock ./bin
	[ ! -d .cache ] || find .cache -mindepth 1 -maxdepth 1 ! -name live -exec rm -rf {} +
