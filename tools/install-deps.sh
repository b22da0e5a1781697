#!/bin/sh
# Installs what building and testing sharedseg needs, from Debian's archive,
# only when something is missing.
set -e
need=""
command -v cmake >/dev/null 2>&1 || need="$need cmake"
command -v cc >/dev/null 2>&1 || need="$need gcc"
command -v clang >/dev/null 2>&1 || need="$need clang"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v valgrind >/dev/null 2>&1 || need="$need valgrind"
[ -z "$need" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "missing:$need (install them, or run as root)" >&2
	exit 1
fi
echo "installing:$need"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need
