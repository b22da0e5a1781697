#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every test must pass whatever state the host's THP knobs and HugeTLB
# pools are in when it starts. This runs the release build's tests and the
# Python examples under three states, then puts back what it found:
#   none     no HugeTLB pages, shmem_enabled=never (a fresh machine)
#   some     256 free 2 MiB pages (the README's advice for a small segment
#            gives at least 138), shmem_enabled=advise
#   plenty   1400 free 2 MiB pages, shmem_enabled=always
# Needs root to change the knobs; elsewhere it says so and does nothing.
#
# Usage: tests/host_states.sh BUILD_DIR [PYTHON]
set -u
build=${1:?usage: host_states.sh BUILD_DIR [PYTHON]}
python=${2:-}
pool=/proc/sys/vm/nr_hugepages
thp=/sys/kernel/mm/transparent_hugepage/shmem_enabled

if [ "$(id -u)" != 0 ] || [ ! -w "$pool" ] || [ ! -w "$thp" ]; then
	echo "host_states: the knobs need root; not run"
	exit 0
fi
saved_pool=$(cat "$pool")
saved_thp=$(sed 's/.*\[\(.*\)\].*/\1/' "$thp")
restore() {
	echo "$saved_pool" >"$pool"
	echo "$saved_thp" >"$thp"
}
trap restore EXIT INT TERM

# The machine lock the tests take while they change knobs.
exec 9>/tmp/sharedseg-test-machine.lock

set_state() {
	flock 9
	case $1 in
	none) pages=0 mode=never ;;
	some) pages=256 mode=advise ;;
	plenty) pages=1400 mode=always ;;
	esac
	echo "$pages" >"$pool"
	echo "$mode" >"$thp"
	flock -u 9
	echo "== host state '$1': $(cat "$pool") HugeTLB pages ($(grep -E 'HugePages_Free' /proc/meminfo | tr -s ' ')), shmem_enabled $mode"
}

failed=""
for state in none some plenty; do
	set_state "$state"
	ctest --test-dir "$build" -j 2 --output-on-failure -E '^valgrind_' || failed="$failed $state(ctest)"
	if [ -n "$python" ]; then
		SSEG_BUILD_DIR="$build" "$python" -m pytest -q python/tests/test_examples.py ||
			failed="$failed $state(python)"
	fi
done
if [ -n "$failed" ]; then
	echo "host_states: failed under:$failed"
	exit 1
fi
echo "host_states: every test passed under none, some and plenty"
