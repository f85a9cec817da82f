#!/usr/bin/env bash
# ensure-vault.sh: make sure a Vault server binary exists for the integration
# tests and print its path on stdout (progress goes to stderr).
#
# Order: $VAULT_BIN, a `vault` on PATH, then a build from the pinned module in
# tools/vault into a cache outside the clone, so a fresh clone on the same
# machine reuses it. Vault >= 1.15 is BSL-licensed: it is a test tool here and
# is never shipped with Airlock. Any Vault or OpenBao binary works via VAULT_BIN.
set -euo pipefail

version=v1.19.0
here=$(cd "$(dirname "$0")" && pwd)
cache=${AIRLOCK_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock-tools}
out="$cache/vault-$version"

if [ -n "${VAULT_BIN:-}" ]; then
	if [ -x "$VAULT_BIN" ]; then echo "$VAULT_BIN"; exit 0; fi
	echo "ensure-vault: VAULT_BIN is set but is not an executable file" >&2
	exit 1
fi
if command -v vault >/dev/null 2>&1; then command -v vault; exit 0; fi
if [ -x "$out" ]; then echo "$out"; exit 0; fi

mkdir -p "$cache"
echo "ensure-vault: building Vault $version from its Go module (once per machine; about 15 minutes cold on 2 cores)" >&2
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
start=$(date +%s)
(
	cd "$here/vault"
	GOFLAGS=-mod=mod go build -v -trimpath -o "$tmp" github.com/hashicorp/vault 2>&1
) | awk -v start="$start" '
	/^(go: |#|.*\.go:[0-9]+)/ { print > "/dev/stderr"; next }
	{ n++; if (n % 200 == 0) { printf "ensure-vault: %d packages compiled (%ds)\n", n, systime() - start > "/dev/stderr"; fflush("/dev/stderr") } }
'
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ] || [ ! -x "$tmp" ]; then
	echo "ensure-vault: building Vault failed (exit $status)" >&2
	exit 1
fi
mv "$tmp" "$out"
trap - EXIT
echo "ensure-vault: built $out in $(( $(date +%s) - start ))s" >&2
echo "$out"
