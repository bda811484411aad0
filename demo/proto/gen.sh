#!/usr/bin/env bash
# Regenerates demo/eventspb from demo/proto/events.proto.
#
# Needs protoc (Debian: apt-get install -y protobuf-compiler) and the two Go
# plugins on PATH:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11   # = google.golang.org/protobuf in go.mod
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
# The generated code is committed, so ordinary builds need none of this.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/../eventspb"
mkdir -p "$out"
PATH="$PATH:$(go env GOPATH)/bin"
protoc -I "$here" \
  --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  "$here/events.proto"
