# The demo game-challenge service (demo/cmd/demo-service, Go module demo/).
# Build context: the repository root; only demo/ is copied.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY demo/go.mod demo/go.sum ./
RUN go mod download
COPY demo/ ./
RUN CGO_ENABLED=0 go build -trimpath -o /out/demo-service ./cmd/demo-service

FROM debian:12.7-slim
RUN useradd --uid 12345 --create-home demo
COPY --from=build /out/demo-service /usr/bin/demo-service
USER demo
EXPOSE 8080 9090
ENTRYPOINT ["demo-service"]
