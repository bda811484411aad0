# xk6-regime: build, test, benchmark, demo. `make help` lists the targets.
SHELL := /bin/bash
GO    ?= go
K6    := ./k6
CORPUS ?= ../shared/corpus/jmh
PROFILE ?= short

.DEFAULT_GOAL := help

## help: list the targets
.PHONY: help
help:
	@grep -E '^## ' $(MAKEFILE_LIST) | sed -e 's/^## //' | awk -F': ' '{printf "  %-14s %s\n", $$1, $$2}'

## build: build ./k6 (k6 v2.2.0 with the extension) with a plain go build
.PHONY: build
build:
	$(GO) build -o $(K6) ./cmd/k6

## build-stock: build ./k6-stock, the same k6 without the extension (bench baseline)
.PHONY: build-stock
build-stock:
	$(GO) build -o ./k6-stock ./cmd/k6-stock

## build-demo: build ./bin/demo-service, the demo game-challenge service
.PHONY: build-demo
build-demo:
	$(GO) build -o ./bin/demo-service ./cmd/demo-service

## deps: install what the tests need on a fresh machine (Debian packages, as root)
.PHONY: deps
deps:
	@./scripts/deps.sh

## vet: gofmt check and go vet
.PHONY: vet
vet:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# packages that start real processes (k6, the demo service, PostgreSQL, InfluxDB, Chromium):
# run one package at a time, so that they do not starve each other of the 2 cores
E2E_PKGS := ./test/...
UNIT_PKGS = $(shell $(GO) list ./... | grep -v '/test/')

## test: vet, build k6 and the demo service, unit tests with -race, the hindsight corpus check without it, every fuzz target for 5 s, then end-to-end tests (real k6, PostgreSQL, InfluxDB) one package at a time
.PHONY: test
test: vet build build-demo
	$(GO) test -race -count=1 -timeout 15m $(UNIT_PKGS)
	set -o pipefail; $(GO) test -count=1 -timeout 10m -run '^TestCorpusHindsight$$' -v ./detector/ | grep -v '^=== '
	GO=$(GO) FUZZTIME=5s ./scripts/fuzz.sh
	K6_BIN=$(CURDIR)/k6 DEMO_BIN=$(CURDIR)/bin/demo-service $(GO) test -race -count=1 -p 1 -timeout 20m $(E2E_PKGS)

## test-short: the fast unit tests only
.PHONY: test-short
test-short:
	$(GO) test -short -count=1 ./detector/... ./extension/... ./internal/...

## fuzz: run every Go fuzz target for FUZZTIME each (default 60s); failing inputs land in testdata/fuzz/ (commit them)
FUZZTIME ?= 60s
.PHONY: fuzz
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

## bench: Go benchmarks (-benchmem) of the detector and the extension's per-sample path, then paired stock-vs-extension k6 runs
.PHONY: bench
bench: build build-stock
	$(GO) test -run '^$$' -bench . -benchmem ./detector/... ./extension/...
	$(GO) run ./tools/k6bench -stock ./k6-stock -k6 $(K6) -pairs 6 -duration 4s

## accuracy: run `k6 x regime detect` over the JMH corpus and score it beside the reference techniques
.PHONY: accuracy
accuracy: build
	@if [ ! -d "$(CORPUS)/series" ]; then echo "accuracy: corpus not found at $(CORPUS); skipped"; exit 0; fi; \
	mkdir -p .cache && \
	$(K6) x regime detect --group fork --column seconds_per_op $(CORPUS)/series/*.csv.gz > .cache/accuracy.jsonl && \
	$(GO) run ./tools/accuracy -corpus $(CORPUS) -detect-output .cache/accuracy.jsonl

## demo: build, start the demo service on 127.0.0.1, run scenarios/combined.js (PROFILE=short), write results/, stop
.PHONY: demo
demo: build build-demo
	@./scripts/demo.sh

## up: start the live stack (InfluxDB, Grafana, demo service + PostgreSQL, k6 with both outputs); needs a Docker engine
.PHONY: up
up:
	GRAFANA_ADMIN_PASSWORD=$${GRAFANA_ADMIN_PASSWORD:-change-me} docker compose up -d --build

## down: stop the live stack and remove its volumes
.PHONY: down
down:
	docker compose down -v

## clean: remove built binaries and caches (results/ is kept)
.PHONY: clean
clean:
	rm -rf $(K6) ./k6-stock ./bin .cache
