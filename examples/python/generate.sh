#!/bin/sh
# Regenerates herald_pb2.py and herald_pb2_grpc.py, the Python stubs of
# api/heraldv1/herald.proto, into this folder (or the folder given as the argument).
# The generated files are committed, so the example runs with Python's grpc package
# alone; run this after changing the .proto. It needs protoc and gRPC's Python plugin
# (Debian: apt-get install protobuf-compiler protobuf-compiler-grpc), or else
# grpcio-tools (python3 -m grpc_tools.protoc).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(cd "${1:-$here}" && pwd)
cd "$here/../../api/heraldv1"
if command -v protoc >/dev/null 2>&1 && command -v grpc_python_plugin >/dev/null 2>&1; then
	protoc -I . --python_out="$out" --grpc_python_out="$out" \
		--plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" herald.proto
else
	python3 -m grpc_tools.protoc -I . --python_out="$out" --grpc_python_out="$out" herald.proto
fi
