# k6 v2.2.0 with the xk6-regime extension (JS module k6/x/regime and the
# xk6-regime-influxdb output), built with xk6 from this repository.
# Build context: the repository root (docker-compose.yml sets it).

# xk6 image pinned by tag: v1.4.5 is a published xk6 release (its release
# notes); the build itself was not run here (no Docker engine). Its Go
# toolchain fetches the go.mod toolchain
# (go 1.26.x) through GOTOOLCHAIN=auto when it is older.
FROM grafana/xk6:1.4.5 AS build
WORKDIR /src
COPY . .
ENV GOTOOLCHAIN=auto CGO_ENABLED=0
# --with MODULE=. replaces the module by this checkout
RUN xk6 build v2.2.0 \
      --output /out/k6 \
      --with github.com/xk6-regime/xk6-regime=.

FROM debian:12.7-slim
RUN useradd --uid 12345 --create-home k6
COPY --from=build /out/k6 /usr/bin/k6
COPY scenarios /scenarios
USER k6
WORKDIR /home/k6
ENTRYPOINT ["k6"]
