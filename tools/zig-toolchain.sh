#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# A CMake toolchain file for Zig as the C compiler of one target, for the
# wheels (python/python.mk) and the aarch64 leg (tests/cross/run.sh). Zig
# links against the exact glibc version the target names (2.28: the
# manylinux_2_28 floor) from stubs it carries, so neither a manylinux
# container nor a sysroot of that glibc is needed, and it cross-compiles
# to aarch64 the same way (tools/install-deps.sh cross installs it).
#   zig-toolchain.sh TARGET DIR [PYINCLUDE]
#     writes DIR/toolchain.cmake for TARGET (x86_64-linux-gnu.2.28,
#     aarch64-linux-gnu.2.28); PYINCLUDE, the Python headers the build
#     uses, when Debian's pyconfig.h there includes the target's own
set -e
zig=${XDG_CACHE_HOME:-$HOME/.cache}/sharedseg/zig-0.17.1/ziglang/zig
[ -x "$zig" ] || { echo "no Zig in $zig: run sh tools/install-deps.sh cross" >&2; exit 1; }
target=$1
multiarch=${target%%.*}
mkdir -p "$2"
dir=$(cd "$2" && pwd) # CMake takes the compiler by its full path
# Debian's pyconfig.h includes <x86_64-linux-gnu/python3.11/pyconfig.h>
# from /usr/include, which Zig does not search (its glibc headers are the
# target's): that one directory, and no other of the host's headers.
cflags=
real=${3:+$(dirname "$3")/$multiarch/$(basename "$3")}
if [ -f "$real/pyconfig.h" ]; then
	mkdir -p "$dir/pyconfig/$multiarch"
	ln -sfn "$real" "$dir/pyconfig/$multiarch/"
	cflags="-isystem $dir/pyconfig"
fi
# CMake takes one program per tool: small wrappers with the target baked in.
printf '#!/bin/sh\nexec %s cc -target %s "$@"\n' "$zig" "$target" >"$dir/cc"
printf '#!/bin/sh\nexec %s ar "$@"\n' "$zig" >"$dir/ar"
printf '#!/bin/sh\nexec %s ranlib "$@"\n' "$zig" >"$dir/ranlib"
chmod +x "$dir/cc" "$dir/ar" "$dir/ranlib"
{
	# Another architecture than this machine's: CMake's cross-compiling mode.
	if [ "${target%%-*}" != "$(uname -m)" ]; then
		echo "set(CMAKE_SYSTEM_NAME Linux)"
		echo "set(CMAKE_SYSTEM_PROCESSOR ${target%%-*})"
	fi
	echo "set(CMAKE_C_COMPILER $dir/cc)"
	echo "set(CMAKE_AR $dir/ar CACHE FILEPATH \"\")"
	echo "set(CMAKE_RANLIB $dir/ranlib CACHE FILEPATH \"\")"
	echo "set(CMAKE_C_FLAGS_INIT \"$cflags\")"
} >"$dir/toolchain.cmake"
