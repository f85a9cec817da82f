#!/usr/bin/env bash
# ensure-pkg.sh COMMAND PACKAGE: install Debian's PACKAGE when COMMAND is
# missing (the proxy tests drive real curl and python3 clients).
set -euo pipefail
cmd=$1 pkg=$2
if command -v "$cmd" >/dev/null 2>&1; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ensure-pkg: $cmd is missing and apt-get is not available; install $pkg" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "ensure-pkg: installing $pkg from Debian packages" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends "$pkg" >&2
