# k6 v2.2.0 with the xk6-regime extension (JS module k6/x/regime, the
# `k6 x regime` subcommand and the xk6-regime-influxdb output), built with
# xk6 from this repository, and the scenario kit under /kit.
# Build context: the repository root (docker-compose.yml sets it).
#
#   docker build -f deploy/k6.Dockerfile -t xk6-regime/k6:dev .

# xk6 image pinned by tag: v1.4.5 is a published xk6 release (its release
# notes), and v1.4.0 is the first xk6 that resolves k6 v2. The image build
# was not run here (no Docker engine); `xk6 build` v1.4.5, built from its
# source, was. go.mod asks for Go 1.25.0 (k6 v2.2.0's minimum):
# GOTOOLCHAIN=auto fetches that toolchain when the image's Go is older.
FROM grafana/xk6:1.4.5 AS build
# the xk6 image ends as its user xk6 (uid 1000, grafana/xk6's
# Dockerfile.goreleaser: USER xk6), who may not create /src or /out
USER root
WORKDIR /src
COPY . .
ENV GOTOOLCHAIN=auto CGO_ENABLED=0
# --with MODULE=. replaces the module by this checkout (the demo service's
# nested module, demo/, is not part of it)
RUN xk6 build v2.2.0 \
      --output /out/k6 \
      --with github.com/xk6-regime/xk6-regime=.

FROM debian:12.7-slim
# CA certificates: an https:// target or InfluxDB URL is verified against them
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 12345 --create-home k6
COPY --from=build /out/k6 /usr/bin/k6
# the kit: scenarios/combined.js imports ../thresholds/ and loads
# proto/events.proto, so both folders keep their relative places
COPY scenarios /kit/scenarios
COPY thresholds /kit/thresholds
USER k6
WORKDIR /home/k6
ENTRYPOINT ["k6"]
