#!/usr/bin/env bash
# InfluxDB OSS 1.8 for tests and local runs, built from the Go module proxy
# (no Docker, no package repository needed; about 40 s the first time).
#
#   scripts/influxd.sh install            build influxd v1.8.3 into $INFLUXD_GOBIN
#                                         (default .cache/bin) unless there; print its path
#   scripts/influxd.sh run DIR [PORT]     install, write DIR/influxdb.conf (everything on
#                                         127.0.0.1, data under DIR) and exec influxd on
#                                         127.0.0.1:PORT (default 8086) in the foreground
#   scripts/influxd.sh createdb [PORT] [DB]   CREATE DATABASE DB (default k6) through /query
set -euo pipefail

INFLUXD_VERSION=v1.8.3
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
gobin=${INFLUXD_GOBIN:-$repo/.cache/bin}

install() {
  if [[ ! -x $gobin/influxd ]]; then
    mkdir -p "$gobin"
    # outside the repository, so that its go.mod is not involved
    (cd /tmp && GOBIN=$gobin GOFLAGS=-mod=mod "${GO:-go}" install "github.com/influxdata/influxdb/cmd/influxd@$INFLUXD_VERSION") >&2
  fi
  echo "$gobin/influxd"
}

config() { # DIR PORT
  local dir=$1 port=$2 rpc=$(( $2 + 1 ))
  cat <<CONF
reporting-disabled = true
bind-address = "127.0.0.1:${INFLUXD_RPC_PORT:-$rpc}"
[meta]
  dir = "$dir/meta"
[data]
  dir = "$dir/data"
  wal-dir = "$dir/wal"
  query-log-enabled = false
  trace-logging-enabled = false
[coordinator]
  log-queries-after = "0s"
[monitor]
  store-enabled = false
[http]
  enabled = true
  bind-address = "127.0.0.1:$port"
  auth-enabled = false
  log-enabled = false
  flux-enabled = false
  pprof-enabled = false
[continuous_queries]
  enabled = false
[logging]
  level = "warn"
CONF
}

case ${1:-} in
  install) install ;;
  config) config "$2" "${3:-8086}" ;;
  run)
    dir=$2 port=${3:-8086}
    bin=$(install)
    mkdir -p "$dir"
    config "$dir" "$port" > "$dir/influxdb.conf"
    exec "$bin" -config "$dir/influxdb.conf"
    ;;
  createdb)
    port=${2:-8086} db=${3:-k6}
    curl -fsS -XPOST "http://127.0.0.1:$port/query" --data-urlencode "q=CREATE DATABASE \"$db\"" ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
