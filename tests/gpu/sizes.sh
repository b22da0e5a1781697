#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The sizes of tests/gpu/run.sh's rows, from the host it runs on. Which
# machine runs it first is unknown: an H100 or H200 box (16 cores, 128 GiB,
# perhaps a gVisor sandbox), or a 2-core VM of the tests through the fake
# driver, where the box's 8 and 32 GiB rows do not end within their step's
# limit (or do not fit at all). The table gives, for each largest row L,
# the cores and MemAvailable a host needs for it, then the pinning sizes
# (L/32, L/4, L), the populate sizes (L/4, L) and the size of the segments
# (variants, copy) and of the registration (register); the first row the
# host meets is taken. A setting (SSEG_GPU_PIN_SIZES and the others, in
# run.sh's header) wins over its column.
#
# Why these: pinning fills L + L/4 + L/32 on one thread; populate fills
# up to 6 rows (1 file and one per core, on 3 page kinds) at L/4 and at L
# with a thread per core. The box's rows (32 GiB) ask a core per 2 GiB of
# L, and so does the table; a row holds at most half of MemAvailable
# (either step holds one row at a time; the rest is the others'). On the
# tests' 2-core VM with a CPU hog on both cores, 8 GiB rows took 34 s
# (pinning, 1 + 8 GiB) and 45 s (populate, 2 rows of 8 GiB) of their 100
# and 90 s, and left the last step out of the budget when jobs filling
# memory ran beside; its 2 GiB rows took 9 and 18 s. CPU load is not read:
# the load average lags by a minute (and would count run.sh's own build),
# and gVisor's /proc/loadavg and /proc/stat give zeros; a hog per core is
# the margin.
#
# Sourced by run.sh (choose_sizes); run alone, it prints the line run.sh
# prints, with SSEG_GPU_HOST_CORES and SSEG_GPU_HOST_MEMAVAILABLE (a size:
# 128GiB) standing in for nproc and /proc/meminfo's MemAvailable, so the
# rule can be tried for any host.

# largest  cores  MemAvailable  pinning             populate       segment
size_table() {
	cat <<'EOF'
32GiB      16     64GiB         1GiB 8GiB 32GiB     8GiB 32GiB     1GiB
8GiB       4      16GiB         256MiB 2GiB 8GiB    2GiB 8GiB      1GiB
2GiB       1      4GiB          64MiB 512MiB 2GiB   512MiB 2GiB    256MiB
512MiB     1      1GiB          16MiB 128MiB 512MiB 128MiB 512MiB  64MiB
128MiB     0      0             4MiB 32MiB 128MiB   32MiB 128MiB   16MiB
EOF
}

# Bytes in a size such as 8GiB.
bytes_of() {
	numfmt --from=iec "${1%iB}" 2>/dev/null
}

# The host's cores, or why not.
host_cores() {
	local cores=${SSEG_GPU_HOST_CORES:-$(nproc)}

	if ! [[ $cores =~ ^[0-9]+$ ]]; then
		echo "SSEG_GPU_HOST_CORES=$cores is not a number of cores"
		return 1
	fi
	echo "$cores"
}

# The host's MemAvailable in bytes, or why not.
host_available() {
	local kb bytes

	if [ -n "${SSEG_GPU_HOST_MEMAVAILABLE:-}" ]; then
		if ! bytes=$(bytes_of "$SSEG_GPU_HOST_MEMAVAILABLE"); then
			echo "SSEG_GPU_HOST_MEMAVAILABLE=$SSEG_GPU_HOST_MEMAVAILABLE is not a size such as 128GiB"
			return 1
		fi
		echo "$bytes"
		return 0
	fi
	kb=$(awk '$1 == "MemAvailable:" { print $2; exit }' /proc/meminfo 2>/dev/null)
	if ! [[ $kb =~ ^[0-9]+$ ]]; then
		echo "/proc/meminfo has no MemAvailable"
		return 1
	fi
	echo $((kb * 1024))
}

# VALUE, and "(NAME)" after it when the setting NAME gave it.
said() {
	if [ -n "${!2:-}" ]; then
		printf '%s (%s)' "${!2}" "$2"
	else
		printf '%s' "$1"
	fi
}

# N core(s).
cores_said() {
	printf '%s core%s' "$1" "$([ "$1" = 1 ] || echo s)"
}

# BYTES as 21.7GiB, or 100MiB under 1 GiB.
bytes_said() {
	awk -v b="$1" 'BEGIN {
		if (b >= 1073741824) printf "%.1fGiB", b / 1073741824; else printf "%.0fMiB", b / 1048576 }'
}

# Sets sizes_cores and sizes_available (0 where unread: the table's
# smallest row asks for nothing), host_said (them, in words) and
# host_unread (why a reading failed; empty when none did).
read_host() {
	host_unread=""
	if sizes_cores=$(host_cores); then
		host_said=$(cores_said "$sizes_cores")
	else
		host_unread=$sizes_cores sizes_cores=0 host_said="? cores"
	fi
	if sizes_available=$(host_available); then
		host_said="$host_said, MemAvailable $(bytes_said "$sizes_available")"
	else
		host_unread=${host_unread:+$host_unread; }$sizes_available sizes_available=0
		host_said="$host_said, MemAvailable ?"
	fi
}

# Sets size, reg_size, pin_sizes and pop_sizes (where no setting gives
# them), sizes_cores, sizes_available and sizes_largest (what the rule
# read and chose) and sizes_said (what was chosen and why, one line).
# Fails when the host could not be read; the rows are then the table's
# smallest.
choose_sizes() {
	local largest need_cores need_avail p1 p2 p3 q1 q2 segment why="the largest"

	read_host
	while read -r largest need_cores need_avail p1 p2 p3 q1 q2 segment; do
		[ "$sizes_cores" -ge "$need_cores" ] &&
			[ "$sizes_available" -ge "$(bytes_of "$need_avail")" ] && break
		why="$largest needs $(cores_said "$need_cores") and $need_avail available"
	done < <(size_table)
	[ -n "$host_unread" ] && why=$host_unread
	# shellcheck disable=SC2034 # run.sh reports it
	sizes_largest=$largest
	size=${SSEG_GPU_SIZE:-$segment}
	reg_size=${SSEG_GPU_REG_SIZE:-$segment}
	pin_sizes=${SSEG_GPU_PIN_SIZES:-$p1 $p2 $p3}
	pop_sizes=${SSEG_GPU_POP_SIZES:-$q1 $q2}
	sizes_said="$host_said: rows up to $largest ($why): pinning $(said "$pin_sizes" SSEG_GPU_PIN_SIZES), populate $(said "$pop_sizes" SSEG_GPU_POP_SIZES), segments $(said "$size" SSEG_GPU_SIZE), registration $(said "$reg_size" SSEG_GPU_REG_SIZE)"
	[ -z "$host_unread" ]
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -u -o pipefail
	choose_sizes
	rc=$?
	echo "$sizes_said"
	exit $rc
fi
