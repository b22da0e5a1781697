#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# What `make bench` needs beyond the build and test dependencies
# (tools/install-deps.sh): matplotlib for the plots, on the interpreter that
# has torch. Installed from Debian's archive only when missing.
set -e
/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "missing: python3-matplotlib (install it, or run as root)" >&2
	exit 1
fi
echo "installing: python3-matplotlib"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-matplotlib
