#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine. Idempotent; needs
# root for apt-get (CI runs as root). Prints what it does.
set -euo pipefail
cd "$(dirname "$0")/.."
# the steps that do work say how long the set-up has taken so far (CI's
# time budget is mostly this script on a fresh machine)
t0=$SECONDS
took() { echo "deps: $1 done after $((SECONDS - t0)) s"; }

need_apt=()
# PostgreSQL's server binaries, where test/pgtest looks for them (any
# version under /usr/lib/postgresql, or initdb on PATH)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null 2>&1 || need_apt+=(postgresql)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
# go test -race needs cgo: a C compiler and the C library's headers
{ command -v gcc >/dev/null 2>&1 && [ -e /usr/include/stdlib.h ]; } || need_apt+=(gcc libc6-dev)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# Node.js: make test runs the thresholds helpers' tests with it (and the
# live harness's V8 services)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
# the live harness's JIT services: a JDK (javac, java); make test starts
# each handler mix once (live/harness TestServicesAnswer)
command -v javac >/dev/null 2>&1 || need_apt+=(default-jdk-headless)
need_live=()
# the python-pg case's PostgreSQL driver, for Debian's own python3 (a pyenv
# python3 on PATH does not see it; the harness looks in both)
{ python3 -c 'import psycopg2' >/dev/null 2>&1 || /usr/bin/python3 -c 'import psycopg2' >/dev/null 2>&1; } ||
  need_live+=(python3-psycopg2)
# actionlint runs shellcheck on the workflow's run: steps (the test requires it)
command -v shellcheck >/dev/null 2>&1 || need_apt+=(shellcheck)
# the history test's Apache Otava runs in a Python virtual environment
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)

if [ "$(id -u)" != 0 ]; then
  # not root: no apt-get. In CI (CI set) a package the tests need is an
  # error; elsewhere a warning, and the tests that need it skip
  if [ ${#need_live[@]} -gt 0 ]; then
    echo "deps: warning: make live needs ${need_live[*]} (as root: apt-get install -y ${need_live[*]})" >&2
  fi
  if [ ${#need_apt[@]} -gt 0 ]; then
    echo "deps: missing Debian packages: ${need_apt[*]} (run as root: apt-get install -y ${need_apt[*]})" >&2
    if [ -n "${CI:-}" ]; then
      exit 1
    fi
    echo "deps: warning: continuing without them; the tests that need them skip (they fail when CI is set)" >&2
  fi
  need_apt=()
  need_live=()
fi
need_apt+=("${need_live[@]}")
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "deps: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  took "apt-get"
fi
# PyPy, for make live's pypy/open case only (no test needs it): installed on
# its own, so that a mirror without it cannot fail the tests' set-up
if ! command -v pypy3 >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "deps: apt-get install pypy3 (make live's pypy/open)"
  export DEBIAN_FRONTEND=noninteractive
  { [ ${#need_apt[@]} -gt 0 ] || apt-get update -qq; } &&
    apt-get install -y -qq --no-install-recommends pypy3 >/dev/null ||
    echo "deps: warning: pypy3 not installed; make live's pypy/open case will say so" >&2
  took "pypy3"
fi
# the docker CLI's compose plugin, for `docker compose config` of docker-compose.yml
# (this machine has the docker client without it, and no engine); built from
# the Go module proxy (~2 min once)
if command -v docker >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1; then
  bin="$PWD/.cache/compose-bin"
  if [ ! -x "$bin/cmd" ]; then
    echo "deps: building docker compose v2.29.7 (Go module proxy)"
    mkdir -p "$bin"
    # outside the repository, so that its go.mod is not involved
    (cd /tmp && GOBIN="$bin" GOFLAGS=-mod=mod "${GO:-go}" install github.com/docker/compose/v2/cmd@v2.29.7)
    took "docker compose"
  fi
  mkdir -p "$HOME/.docker/cli-plugins"
  cp "$bin/cmd" "$HOME/.docker/cli-plugins/docker-compose"
fi

# a real InfluxDB OSS 1.8 for the output's end-to-end tests (Go module proxy, ~40 s once)
./scripts/influxd.sh install
# the pinned actionlint and kubeconform (Go module proxy, ~20 s once)
make --no-print-directory tools
# Apache Otava (change detection over run histories, PyPI apache-otava), for
# the test of `k6 x regime history` (test/e2e/history_test.go)
if [ ! -x .cache/otava/bin/otava ] && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "deps: warning: no python3-venv, so no Apache Otava: TestHistoryOtava skips (fails when CI is set)" >&2
elif [ ! -x .cache/otava/bin/otava ]; then
  echo "deps: pip install apache-otava==0.8.0 into .cache/otava"
  python3 -m venv .cache/otava
  .cache/otava/bin/pip install -q --disable-pip-version-check -c scripts/otava-constraints.txt apache-otava==0.8.0
  took "apache-otava"
fi
echo "deps: ok after $((SECONDS - t0)) s"
