#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The README's C example as a user runs it: install, build examples/share.c
# against the installed library with pkg-config, run two ranks. The README
# block is an excerpt of this file (tests/readme.py checks it); ctest runs
# it as readme_c. A fresh $HOME stands in for the user's.
set -eu
: "${SSEG_SOURCE_DIR:?run through ctest}" "${SSEG_BUILD_DIR:?run through ctest}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
ln -s "$SSEG_SOURCE_DIR/examples" examples
export HOME="$work" BUILD="$SSEG_BUILD_DIR"
# The README's commands run from the checkout, with the build's compiler
# and sanitizer flags (the sanitizer build's library needs them).
make() { command make -s -C "$SSEG_SOURCE_DIR" "$@" >/dev/null; }
cc() { command "${SSEG_CC:-cc}" ${SSEG_CFLAGS:-} "$@"; }

make install PREFIX=$HOME/.local
export PKG_CONFIG_PATH=$HOME/.local/lib/pkgconfig
cc examples/share.c -o share $(pkg-config --cflags --libs sharedseg)
export LD_LIBRARY_PATH=$(pkg-config --variable=libdir sharedseg)
./share 0 2 & ./share 1 2; wait

./share 0 2 >out0 & ./share 1 2 >out1; wait
grep -q "rank 0 of 2 reads: written once by rank 0" out0
grep -q "rank 1 of 2 reads: written once by rank 0" out1
# A bad argument is a usage line (exit 2); a group that fails says why (exit 1).
rc=0; ./share 2 2 2>err || rc=$?
[ "$rc" = 2 ] && grep -q "^usage: share RANK WORLD" err
echo "readme_c: ok"

# The host pool's example (docs/c-api.md): a second process loads what the
# first stored, found by the pool's name.
cc examples/pool.c -o pool $(pkg-config --cflags --libs sharedseg)
./pool >out
grep -q "loaded: the prefix's KV" out
