#!/usr/bin/env bash
# ensure-redis.sh: make sure redis-server exists for the integration tests and
# print its path on stdout. Installs Debian's package when it is missing.
set -euo pipefail

if [ -n "${REDIS_SERVER_BIN:-}" ]; then
	if [ -x "$REDIS_SERVER_BIN" ]; then echo "$REDIS_SERVER_BIN"; exit 0; fi
	echo "ensure-redis: REDIS_SERVER_BIN is set but is not an executable file" >&2
	exit 1
fi
if command -v redis-server >/dev/null 2>&1; then command -v redis-server; exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ensure-redis: redis-server is missing and apt-get is not available; install Redis and set REDIS_SERVER_BIN" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "ensure-redis: installing redis-server from Debian packages" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends redis-server >&2
# The package starts a system service; the tests start their own servers.
if command -v systemctl >/dev/null 2>&1; then $sudo systemctl disable --now redis-server >/dev/null 2>&1 || true; fi
command -v redis-server
