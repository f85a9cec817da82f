#!/usr/bin/env bash
# check-proto.sh: fail when `make proto` would change the committed
# generated code. It regenerates into a scratch directory with the pinned
# plugins and compares; the work tree is never touched. Without protoc it
# says so and passes (make tools installs it on Debian).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v protoc >/dev/null 2>&1; then
	echo "check-proto: protoc is not installed; generated code not checked" >&2
	exit 0
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/out/examples/notes"
GOBIN="$scratch/bin" ${GO:-go} install "$PROTOC_GEN_GO"
GOBIN="$scratch/bin" ${GO:-go} install "$PROTOC_GEN_GO_GRPC"
mapfile -t protos < <(find proto -name '*.proto' | sort)
PATH="$scratch/bin:$PATH" protoc -I proto \
	--go_out="$scratch/out" --go_opt=module=github.com/airlock-dev/airlock \
	--go-grpc_out="$scratch/out" --go-grpc_opt=module=github.com/airlock-dev/airlock \
	"${protos[@]}"
# The notes example port, generated as docs/plugin-v1.md says.
(cd examples/notes && PATH="$scratch/bin:$PATH" protoc -I . -I ../../proto \
	--go_out="$scratch/out/examples/notes" --go_opt=module=github.com/airlock-dev/airlock/examples/notes \
	--go-grpc_out="$scratch/out/examples/notes" --go-grpc_opt=module=github.com/airlock-dev/airlock/examples/notes \
	numinance/ports/notes/v1/notes.proto)
status=0
while IFS= read -r f; do
	if ! cmp -s "$f" "$scratch/out/$f"; then
		echo "check-proto: $f differs from what make proto generates" >&2
		status=1
	fi
done < <(cd "$scratch/out" && find . -name '*.go' | sed 's|^\./||' | sort)
for f in $(git ls-files 'proto/*.pb.go' 'examples/notes/*.pb.go'); do
	[ -f "$scratch/out/$f" ] || { echo "check-proto: $f is committed but not generated" >&2; status=1; }
done
[ "$status" -eq 0 ] && echo "check-proto: generated code is current" >&2
exit "$status"
