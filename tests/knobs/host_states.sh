#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every test must pass whatever state the host's THP knobs and HugeTLB
# pools are in when it starts. This runs the release build's tests and the
# Python examples (the whole Python suite in the last) under three states,
# then puts back what it found:
#   none     no HugeTLB pages, shmem_enabled=never (a fresh machine)
#   some     256 free 2 MiB pages (docs/cli.md's advice for a small segment
#            gives at least 138), shmem_enabled=advise
#   plenty   1400 free 2 MiB pages and two 1 GiB pages, shmem_enabled=always
# The 2 MiB size's own shmem_enabled knob (kernels >= 6.8), which overrides
# the global one unless it says inherit, is set to inherit in every state.
# Needs root to change the knobs; elsewhere it says so, and runs the Python
# suite once in the state the host is in (make test counts on it).
#
# Usage: tests/knobs/host_states.sh BUILD_DIR [PYTHON]
#   HOST_STATES="plenty" runs only the states named.
#   HOST_STATES_FOUND_TESTED=1: ctest has just run in the state the host is
#   in (make test's test-c); a state that is that one leaves its ctest out.
set -u
build=${1:?usage: host_states.sh BUILD_DIR [PYTHON]}
python=${2:-}
pool=/proc/sys/vm/nr_hugepages
thp=/sys/kernel/mm/transparent_hugepage/shmem_enabled
thp2m=/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled
pool1g=/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages

if [ "$(id -u)" != 0 ] || [ ! -w "$pool" ] || [ ! -w "$thp" ]; then
	echo "host_states: the knobs need root; not run"
	[ -z "$python" ] && exit 0
	echo "host_states: the Python suite once, in the state the host is in"
	SSEG_BUILD_DIR="$build" exec "$python" -m pytest -q -m "not engine" python/tests
fi
saved_pool=$(cat "$pool")
saved_thp=$(sed 's/.*\[\(.*\)\].*/\1/' "$thp")
saved_thp2m=""
[ -w "$thp2m" ] && saved_thp2m=$(sed 's/.*\[\(.*\)\].*/\1/' "$thp2m")
saved_pool1g=""
[ -w "$pool1g" ] && saved_pool1g=$(cat "$pool1g")
restore() {
	echo "$saved_pool" >"$pool"
	echo "$saved_thp" >"$thp"
	[ -z "$saved_thp2m" ] || echo "$saved_thp2m" >"$thp2m"
	[ -z "$saved_pool1g" ] || echo "$saved_pool1g" >"$pool1g"
}
trap restore EXIT INT TERM

# The machine lock the tests take while they change knobs.
exec 9>/tmp/sharedseg-test-machine.lock

knobs() {
	case $1 in
	none) pages=0 mode=never gig=0 ;;
	some) pages=256 mode=advise gig=0 ;;
	plenty) pages=1400 mode=always gig=2 ;;
	esac
}

# Whether the host was found in state $1 (the 1 GiB pool counts where it
# exists, the 2 MiB knob where it exists and says inherit).
found_in() {
	knobs "$1"
	[ "$saved_pool" = "$pages" ] && [ "$saved_thp" = "$mode" ] &&
		{ [ -z "$saved_pool1g" ] || [ "$saved_pool1g" = "$gig" ]; } &&
		{ [ -z "$saved_thp2m" ] || [ "$saved_thp2m" = inherit ]; }
}

set_state() {
	flock 9
	knobs "$1"
	echo "$pages" >"$pool"
	echo "$mode" >"$thp"
	[ -z "$saved_thp2m" ] || echo inherit >"$thp2m"
	# The kernel may find fewer free 1 GiB ranges than asked: say what it gave.
	[ -z "$saved_pool1g" ] || echo "$gig" >"$pool1g" 2>/dev/null || true
	flock -u 9
	echo "== host state '$1': $(cat "$pool") 2 MiB HugeTLB pages ($(grep -E 'HugePages_Free' /proc/meminfo | tr -s ' ')), $(cat "$pool1g" 2>/dev/null || echo 0) 1 GiB pages, shmem_enabled $mode (2 MiB knob: inherit)"
}

failed=""
for state in ${HOST_STATES:-none some plenty}; do
	set_state "$state"
	if [ -n "${HOST_STATES_FOUND_TESTED:-}" ] && found_in "$state"; then
		echo "host_states: ctest in '$state' left out: the host was found in it, and ctest has run there"
	else
		ctest --test-dir "$build" -j 2 --output-on-failure -E '^valgrind_' || failed="$failed $state(ctest)"
	fi
	if [ -n "$python" ]; then
		# The whole Python suite where the host differs most from a fresh
		# one (the PyPI leg runs it in the state the host is in);
		# the examples, which measure host memory, in every state.
		tests=python/tests/test_examples.py
		[ "$state" != plenty ] || tests=python/tests
		SSEG_BUILD_DIR="$build" "$python" -m pytest -q -m "not engine" $tests ||
			failed="$failed $state(python)"
	fi
done
if [ -n "$failed" ]; then
	echo "host_states: failed under:$failed"
	exit 1
fi
echo "host_states: every test passed under none, some and plenty"
