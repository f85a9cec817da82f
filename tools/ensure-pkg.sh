#!/usr/bin/env bash
# ensure-pkg.sh COMMAND PACKAGE: install Debian's PACKAGE when COMMAND is
# missing (the proxy tests drive real curl and python3 clients). A COMMAND
# that is an absolute path names a file the package provides instead.
set -euo pipefail
cmd=$1 pkg=$2
case $cmd in
/*) if [ -e "$cmd" ]; then exit 0; fi ;;
*) if command -v "$cmd" >/dev/null 2>&1; then exit 0; fi ;;
esac
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
