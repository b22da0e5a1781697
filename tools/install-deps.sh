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
command -v objdump >/dev/null 2>&1 || need="$need binutils"
command -v mpicc >/dev/null 2>&1 || need="$need openmpi-bin libopenmpi-dev"
# The Python package's tests run on Debian's interpreter and packages.
/usr/bin/python3 -c 'import torch, numpy, pytest, mpi4py, setuptools, wheel' >/dev/null 2>&1 ||
	need="$need python3 python3-dev python3-torch python3-numpy python3-pytest python3-mpi4py python3-setuptools python3-pip python3-wheel"
[ -f /usr/include/python3.11/Python.h ] || ls /usr/include/python3*/Python.h >/dev/null 2>&1 ||
	need="$need python3-dev"
[ -z "$need" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "missing:$need (install them, or run as root)" >&2
	exit 1
fi
echo "installing:$need"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need
