#!/usr/bin/env bash
# make demo: start the demo service on 127.0.0.1 (embedded database), run the
# combined scenario on the short profile against it (or SCRIPT), stop the
# service. The exit status is k6's.
set -euo pipefail
cd "$(dirname "$0")/.."

HTTP_ADDR=${DEMO_HTTP_ADDR:-127.0.0.1:18080}
GRPC_ADDR_=${DEMO_GRPC_ADDR:-127.0.0.1:19090}
PROFILE=${PROFILE:-short}
VARIANT=${VARIANT:-gradual}
SCRIPT=${SCRIPT:-scenarios/combined.js}
log=$(mktemp -t demo-service.XXXXXX.log)

# the ports must be free: a process already answering /healthz there would
# pass the wait below while the demo service failed to bind, and k6 would
# load that process instead
for a in "DEMO_HTTP_ADDR=$HTTP_ADDR" "DEMO_GRPC_ADDR=$GRPC_ADDR_"; do
  hp=${a#*=}
  host=${hp%:*}
  host=${host#[}
  host=${host%]}
  # an empty host listens on every address: 127.0.0.1 is one of them
  if timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "${host:-127.0.0.1}" "${hp##*:}" 2>/dev/null; then
    echo "demo: ${hp} is in use by another process; free it, or set ${a%%=*} to a free 127.0.0.1 port"
    exit 1
  fi
done

./bin/demo-service -http-addr "$HTTP_ADDR" -grpc-addr "$GRPC_ADDR_" 2>"$log" &
svc=$!
# '|| true': under set -e a failed kill (the service already gone) made the
# trap's status the script's (k6's 99 became 1)
trap 'kill -TERM $svc 2>/dev/null || true; wait $svc 2>/dev/null || true' EXIT

# wait (bounded: 10 s) until the service answers
up=
for _ in $(seq 1 100); do
  if ! kill -0 $svc 2>/dev/null; then echo "demo: the service did not start:"; cat "$log"; exit 1; fi
  if curl -fsS "http://$HTTP_ADDR/healthz" >/dev/null 2>&1; then up=1; break; fi
  sleep 0.1
done
if [ -z "$up" ]; then
  echo "demo: the service did not answer http://$HTTP_ADDR/healthz within 10 s; its log:"
  cat "$log"
  exit 1
fi

# a testid of this run's own, to find its results folder (not an earlier
# run's, and none when k6 wrote none)
TESTID=${TESTID:-demo-$$-$RANDOM}
RESULTS_DIR=${RESULTS_DIR:-results}
set +e
BASE_URL="http://$HTTP_ADDR" GRPC_ADDR="$GRPC_ADDR_" PROFILE="$PROFILE" VARIANT="$VARIANT" \
  TESTID="$TESTID" RESULTS_DIR="$RESULTS_DIR" ./k6 run --no-usage-report "$SCRIPT"
code=$?
# the folder name holds the testid as saveResults writes it: characters
# other than letters, digits, '_', '.' and '-' become '_'
safe=$(printf '%s' "$TESTID" | tr -c 'A-Za-z0-9_.-' '_')
latest=$(ls -1dt "$RESULTS_DIR"/*-"$safe"-*/ 2>/dev/null | head -1)
set -e
echo
if [ -n "$latest" ]; then
  echo "demo: k6 exited with $code; results in $latest (service log: $log)"
else
  echo "demo: k6 exited with $code; it wrote no results folder of this run in $RESULTS_DIR/ (service log: $log)"
fi
exit $code
