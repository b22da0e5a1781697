#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The checks that need a real NVIDIA GPU, in one run of under 5 minutes (one
# H200, 16 cores). Every step runs whatever happened before it, within what
# is left of the time budget, and reports JSON lines; nothing the machine
# lacks or refuses (no cuda.h, a read-only /proc/sys/vm/nr_hugepages, a
# sandbox) stops the run: it is reported as skipped or refused.
#
# Steps, most telling first: the CUDA ABI check against the installed
# cuda.h; the build; the machine (kernel, gVisor or Firecracker clues,
# container, THP and HugeTLB knobs); the sizes of the rows below, from the
# host's cores and MemAvailable (tests/gpu/sizes.sh: the box's on a host
# of 16 cores and 64 GiB available, smaller on a smaller one); gpu_check
# env (driver, devices, what the OS and driver refuse, each next to what
# the project's fake driver answers, and what the library's own probes
# conclude); sharing variants; copy (H2D and D2H of KV blocks up to one
# MLA block run, from a VMM segment's owner and its import in a second
# process, a registered memfd segment, cuMemHostAlloc and malloc memory,
# with the memory type the driver reports for each); pinning (seconds per
# GiB: cuMemHostRegister of a memfd mapping against VMM create + export +
# import, at 1, 8, 32 GiB on the box); torch (python/tests/helpers/gpu_nccl.py:
# NCCL with two GPUs, else gloo with the copies on the one GPU, else gloo
# on CPU; is_pinned() and non_blocking copies over each kind of memory);
# register (cuMemHostRegister by several ranks at once, 4 KiB against
# 2 MiB pages); populate (CPU only: one memfd against one per core under
# one mapping, 4 KiB, THP and HugeTLB pages, at 8 and 32 GiB on the box).
# Results: $OUT/gpu.jsonl (./gpu.jsonl without OUT), a line per step
# (name, pass/fail/skipped, detail), then a summary: what was refused, one
# line each, and the ratios.
#
# The "rule" lines settle what is known only from documentation or field
# reports, each against the fake driver's answer: VMM calls without a
# context; cuMemMap's offset; HOST_NUMA create (304 or another code in a
# container); access granted in one call against one entry per call, and
# 217 for a device without peer access; POSIX fd import on a device
# without peer access; fabric create/export/import, with and without the
# POSIX fd beside it; attribute 141 by driver version; host registration
# of an unaligned address, with READ_ONLY, of memory the CPU may only read
# (with and without READ_ONLY); device pointers without DEVICEMAP;
# cuCtxSynchronize with and without a context; the driver in a forked
# child. "library_probe" lines give host_vmm_works, fabric_works and
# sseg_check_support as the library decides them.
#
# Environment (all optional):
#   OUT                JSON lines go to $OUT/gpu.jsonl
#   SSEG_GPU_SIZE      segment size for variants and copies (1GiB on the
#                      box; the sizes of this and the next three settings
#                      come from the host, tests/gpu/sizes.sh)
#   SSEG_GPU_REG_SIZE  bytes registered per rank (1GiB)
#   SSEG_GPU_REPS      repetitions of each measurement (5)
#   SSEG_GPU_RANKS     ranks registering at once (4)
#   SSEG_GPU_PIN_SIZES sizes the pinning step times ("1GiB 8GiB 32GiB")
#   SSEG_GPU_POP_SIZES sizes the populate step fills ("8GiB 32GiB")
#   SSEG_GPU_HOST_CORES, SSEG_GPU_HOST_MEMAVAILABLE  stand in for the
#                      host's cores and MemAvailable in that rule
#   SSEG_GPU_BUDGET    seconds for the whole run (280)
#   SSEG_GPU_BUILD     an existing build directory instead of building one
#                      (without cmake, build-gpu/ or build/ if brought along)
#   SSEG_GPU_PYTHON    the interpreter for the torch step (else the first
#                      of python3, /usr/bin/python3 and the PyPI test
#                      environment's whose torch sees a GPU, else has torch)
#   SSEG_GPU_TORCH=0   leave the torch step out
#   SSEG_GPU_POOL=0    never touch /proc/sys/vm/nr_hugepages
#   CUDA_HOME          where to look for cuda.h first
#   SHAREDSEG_CUDA_LIBRARY  another driver library (the fake, in test_gpu_check)
set -u -o pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out_dir=${OUT:-.}
mkdir -p "$out_dir"
out="$out_dir/gpu.jsonl"
reps=${SSEG_GPU_REPS:-5}
ranks=${SSEG_GPU_RANKS:-4}
budget=${SSEG_GPU_BUDGET:-280}
work=$(mktemp -d)
started=$SECONDS
pool_saved=""
note="" # the next step line's detail
: >"$out"

cleanup() {
	if [ -n "$pool_saved" ]; then
		echo "$pool_saved" >/proc/sys/vm/nr_hugepages 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=tests/gpu/sizes.sh
. "$root/tests/gpu/sizes.sh"

# A JSON string: quotes and backslashes escaped, control characters dropped.
json_str() {
	local s
	s=$(printf '%s' "$1" | tr -d '\000-\010\013-\037' | tr '\t\n' '  ')
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	printf '"%s"' "$s"
}

emit() {
	printf '%s\n' "$1" >>"$out"
}

# step NAME RESULT DETAIL SECONDS: one line per step of this script.
step() {
	emit "{\"check\": \"step\", \"step\": $(json_str "$1"), \"result\": $(json_str "$2"), \"detail\": $(json_str "$3"), \"seconds\": $4}"
	printf '%-10s %-8s %s\n' "$1" "$2" "$3"
}

left() {
	echo $((budget - (SECONDS - started)))
}

# "N refused, M skipped" for a step's lines (nothing when none were).
outcomes() {
	local refused skipped
	refused=$(grep -c '"result": "refused"' "$1")
	skipped=$(grep -c '"result": "skipped"' "$1")
	[ "$refused" -gt 0 ] && printf '%s refused' "$refused"
	[ "$refused" -gt 0 ] && [ "$skipped" -gt 0 ] && printf ', '
	[ "$skipped" -gt 0 ] && printf '%s skipped' "$skipped"
	return 0
}

# run NAME LIMIT CMD...: runs CMD within LIMIT seconds (less if the budget
# is nearly spent); its JSON lines join $out, its stderr is kept.
run() {
	local name=$1 limit=$2 t0=$SECONDS rc=0 avail detail
	shift 2
	avail=$(left)
	if [ "$avail" -lt 5 ]; then
		step "$name" skipped "out of time" 0
		return 0
	fi
	[ "$limit" -gt "$avail" ] && limit=$avail
	timeout --kill-after=5 "$limit" "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
	grep '^{' "$work/$name.out" >>"$out"
	if [ "$rc" -eq 0 ]; then
		detail=$(outcomes "$work/$name.out")
		[ -n "$note" ] && detail="$note${detail:+; $detail}"
		step "$name" pass "$detail" $((SECONDS - t0))
	elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		step "$name" fail "timed out after ${limit}s" $((SECONDS - t0))
	else
		step "$name" fail "exit $rc: $(tail -n 1 "$work/$name.err")" $((SECONDS - t0))
	fi
	return 0
}

# ---- the ABI check, against the installed cuda.h ----

find_cuda_h() {
	local nvcc dir
	nvcc=$(command -v nvcc 2>/dev/null || true)
	for dir in "${CUDA_HOME:+$CUDA_HOME/include}" "${CUDA_PATH:+$CUDA_PATH/include}" \
		/usr/local/cuda/include "${nvcc:+$(dirname "$nvcc")/../include}" /usr/include; do
		if [ -n "$dir" ] && [ -f "$dir/cuda.h" ] && [ -f "$dir/cudaTypedefs.h" ]; then
			(cd "$dir" && pwd)
			return 0
		fi
	done
	return 1
}

abi_check() {
	local inc rc=0 cc=${CC:-cc}
	if ! inc=$(find_cuda_h); then
		emit '{"check": "cuda_abi", "result": "skipped", "detail": "no cuda.h (CUDA_HOME, /usr/local/cuda, nvcc)"}'
		step abi skipped "no cuda.h" 0
		return 0
	fi
	if ! "$cc" -std=gnu11 -DSSEG_HAVE_CUDA_H -I"$root/src" -I"$root/tests" -I"$inc" \
		"$root/tests/test_cuda_abi.c" "$root/tests/abi/cuda_abi_toolkit.c" \
		-o "$work/cuda_abi" 2>"$work/abi.err"; then
		emit "{\"check\": \"cuda_abi\", \"result\": \"fail\", \"cuda_h\": $(json_str "$inc"), \"detail\": $(json_str "$(head -n 3 "$work/abi.err")")}"
		step abi fail "does not compile against $inc" 0
		return 0
	fi
	"$work/cuda_abi" >"$work/abi.out" 2>&1 || rc=$?
	emit "{\"check\": \"cuda_abi\", \"result\": \"$([ "$rc" -eq 0 ] && echo pass || echo fail)\", \"cuda_h\": $(json_str "$inc"), \"detail\": $(json_str "$(tr '\n' ';' <"$work/abi.out")")}"
	step abi "$([ "$rc" -eq 0 ] && echo pass || echo fail)" "$(tail -n 1 "$work/abi.out")" 0
}

# ---- the build ----

build() {
	local dir=${SSEG_GPU_BUILD:-}
	if [ -n "$dir" ] && [ -x "$dir/sseg_gpu_check" ]; then
		bin="$dir/sseg_gpu_check"
		step build pass "using $dir" 0
		return 0
	fi
	if ! command -v cmake >/dev/null 2>&1; then
		for dir in "$root/build-gpu" "$root/build"; do
			if [ -x "$dir/sseg_gpu_check" ]; then
				bin="$dir/sseg_gpu_check"
				step build pass "no cmake here: using $dir, brought along" 0
				return 0
			fi
		done
		step build fail "no cmake here, and no build-gpu/ or build/ brought along" 0
		return 0
	fi
	dir="$root/build-gpu"
	run build 150 bash -c "cmake -S '$root' -B '$dir' -DCMAKE_BUILD_TYPE=Release -DSSEG_TESTS=OFF >/dev/null && cmake --build '$dir' -j\"\$(nproc)\" >/dev/null"
	bin="$dir/sseg_gpu_check"
}

# ---- the machine ----

first_line() {
	head -n 1 "$1" 2>/dev/null | tr -d '\n'
}

# A sysfs or procfs knob: its value, and whether writing it back works.
knob() {
	local path=$1 value cur writable=false
	value=$(first_line "$path")
	cur=$value
	[[ $value == *"["*"]"* ]] && cur=${value#*[} && cur=${cur%%]*}
	if [ -n "$value" ] && (echo "$cur" >"$path") 2>/dev/null; then
		writable=true
	fi
	printf '{"knob": %s, "value": %s, "writable": %s}' "$(json_str "$path")" "$(json_str "$value")" "$writable"
}

# gVisor (runsc) reports kernel 4.4.0, 4.19.0-gvisor since 2025, with a
# fixed build date, and its own dmesg. Firecracker gives no SMBIOS table
# (no /sys/class/dmi/id) to a guest that has the hypervisor CPU flag, and
# older guests find their devices on virtio_mmio.device= in the command
# line. The raw clues are kept next to the verdicts.
sandbox_clues() {
	local kernel=$1 version=$2 cmdline=$3 dmi=$4 hypervisor=false gvisor=false fc=false
	grep -q '^flags.* hypervisor' /proc/cpuinfo 2>/dev/null && hypervisor=true
	if [[ $kernel == 4.4.0 || $kernel == *gvisor* || $version == *"Sun Jan 10 15:06:54 PST 2016"* ]] ||
		dmesg 2>/dev/null | grep -q "gVisor"; then
		gvisor=true
	fi
	if [[ $dmi == *Firecracker* || $cmdline == *irecracker* || $cmdline == *virtio_mmio.device=* ]] ||
		{ [ "$hypervisor" = true ] && [ ! -d /sys/class/dmi/id ]; }; then
		fc=true
	fi
	printf '"gvisor": %s, "firecracker": %s, "hypervisor": %s, "smbios": %s' \
		"$gvisor" "$fc" "$hypervisor" "$([ -d /sys/class/dmi/id ] && echo true || echo false)"
}

machine() {
	local kernel version cmdline dmi clues virt="" container="" smi platform
	kernel=$(uname -r)
	version=$(first_line /proc/version)
	cmdline=$(first_line /proc/cmdline)
	dmi=$(cat /sys/class/dmi/id/sys_vendor /sys/class/dmi/id/product_name 2>/dev/null | tr '\n' ' ')
	clues=$(sandbox_clues "$kernel" "$version" "$cmdline" "$dmi")
	platform=$(find /sys/bus/platform/devices -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null)
	virt=$(systemd-detect-virt 2>/dev/null || true)
	[ -e /.dockerenv ] && container=docker
	[ -e /run/.containerenv ] && container=podman
	smi=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true)
	emit "{\"check\": \"machine\", \"kernel\": $(json_str "$kernel"), \"proc_version\": $(json_str "$version"), $clues, \"dmi\": $(json_str "$dmi"), \"platform_devices\": $(json_str "$platform"), \"cmdline\": $(json_str "$cmdline"), \"virt\": $(json_str "$virt"), \"container\": $(json_str "$container"), \"nvidia_smi\": $(json_str "$smi"), \"cpus\": $(nproc)}"
	emit "{\"check\": \"knobs\", \"knobs\": [$(knob /sys/kernel/mm/transparent_hugepage/shmem_enabled), $(knob /sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled), $(knob /sys/kernel/mm/transparent_hugepage/enabled), $(knob /proc/sys/vm/nr_hugepages)]}"
	step machine pass "kernel $kernel, ${clues//\"/}${smi:+, $smi}" 0
}

# ---- the sizes of the rows: tests/gpu/sizes.sh ----

sizes_step() {
	local result=pass

	choose_sizes || result=fail
	emit "{\"check\": \"sizes\", \"result\": \"$result\", \"cores\": $sizes_cores, \"mem_available\": $sizes_available, \"largest\": $(json_str "$sizes_largest"), \"pin_sizes\": $(json_str "$pin_sizes"), \"pop_sizes\": $(json_str "$pop_sizes"), \"size\": $(json_str "$size"), \"reg_size\": $(json_str "$reg_size")}"
	step sizes "$result" "$sizes_said" 0
}

# ---- HugeTLB pages for the 2 MiB registration and population ----

# The largest of SIZE...
largest() {
	local size best="" most=0 bytes
	for size in "$@"; do
		bytes=$(bytes_of "$size") || continue
		[ "$bytes" -gt "$most" ] && most=$bytes && best=$size
	done
	echo "$best"
}

# Asks for the pages SIZE needs, if the knob can be written; a missing or
# read-only knob is a skipped HugeTLB case, never a failure.
pool_grow() {
	local bytes need cur
	[ "${SSEG_GPU_POOL:-1}" = 0 ] && return 0
	cur=$(cat /proc/sys/vm/nr_hugepages 2>/dev/null) || return 0
	bytes=$(bytes_of "$1") || return 0
	need=$((bytes / 2097152 + 8))
	if (echo $((cur + need)) >/proc/sys/vm/nr_hugepages) 2>/dev/null; then
		pool_saved=$cur
	fi
	return 0
}

pool_restore() {
	if [ -n "$pool_saved" ]; then
		echo "$pool_saved" >/proc/sys/vm/nr_hugepages 2>/dev/null || true
		pool_saved=""
	fi
}

# ---- torch over our segments: python/tests/helpers/gpu_nccl.py ----

# The interpreter for the torch step: SSEG_GPU_PYTHON, else the first whose
# torch sees a GPU, else the first with torch; "" when none has torch. One
# import of torch a candidate: on a loaded host each takes seconds of the
# budget, before any step's limit starts.
torch_python() {
	local cand first="" rc
	if [ -n "${SSEG_GPU_PYTHON:-}" ]; then
		echo "$SSEG_GPU_PYTHON"
		return 0
	fi
	for cand in python3 /usr/bin/python3 \
		"${XDG_CACHE_HOME:-$HOME/.cache}/sharedseg/venv-pypi/bin/python"; do
		command -v "$cand" >/dev/null 2>&1 || continue
		rc=0
		"$cand" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)' \
			2>/dev/null || rc=$?
		if [ "$rc" -eq 0 ]; then
			echo "$cand"
			return 0
		fi
		[ "$rc" -eq 3 ] && [ -z "$first" ] && first=$cand
	done
	echo "$first"
}

# The package's extension for $1: one that loads already (built here by
# make python, or brought along: an abi3 module serves CPython 3.11 and
# newer), else built with the interpreter's Python.h where it has one (pip
# cannot install Python.h). Prints how; fails with why not.
torch_module() {
	local py=$1 inc
	if PYTHONPATH="$root/python" "$py" -c 'import sharedseg._native' 2>/dev/null; then
		echo "the built sharedseg._native"
		return 0
	fi
	inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
	if [ ! -f "$inc/Python.h" ]; then
		echo "no sharedseg._native loads in $py and it has no Python.h to build one ($inc; pip cannot install it): run make python where Python.h is (abi3: CPython 3.11+) and bring python/sharedseg/_native.abi3.so"
		return 1
	fi
	run torch_build 120 make -C "$root" --no-print-directory python PYTHON="$py"
	if PYTHONPATH="$root/python" "$py" -c 'import sharedseg._native' 2>/dev/null; then
		echo "sharedseg._native built with $inc/Python.h"
		return 0
	fi
	echo "make python with $inc/Python.h gave no sharedseg._native that loads"
	return 1
}

torch_skipped() {
	emit "{\"check\": \"nccl\", \"result\": \"skipped\", \"detail\": $(json_str "$1")}"
	step torch skipped "$1" 0
}

torch_step() {
	local script="$root/python/tests/helpers/gpu_nccl.py" py how gpus args
	if [ "${SSEG_GPU_TORCH:-1}" = 0 ]; then
		torch_skipped "SSEG_GPU_TORCH=0"
		return 0
	fi
	py=$(torch_python)
	if [ -z "$py" ]; then
		torch_skipped "no interpreter with torch (python3, /usr/bin/python3, the PyPI test environment); set SSEG_GPU_PYTHON"
		return 0
	fi
	if ! how=$(torch_module "$py"); then
		torch_skipped "$how"
		return 0
	fi
	gpus=$("$py" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null || echo 0)
	# NCCL needs a GPU per rank: with one, the groups are gloo's and the
	# copies go to the one GPU; without CUDA, everything is on CPU.
	if [ "$gpus" -ge 2 ]; then
		args="--backend nccl"
		emit "{\"check\": \"nccl\", \"result\": \"pass\", \"detail\": $(json_str "$gpus GPUs: NCCL, a GPU per rank")}"
	elif [ "$gpus" -eq 1 ]; then
		args="--backend gloo --device cuda"
		emit "{\"check\": \"nccl\", \"result\": \"skipped\", \"detail\": \"one GPU: NCCL refuses two ranks on one GPU (Duplicate GPU detected; 2.30+ unless NCCL_MULTI_RANK_GPU_ENABLE=1): gloo groups, the copies on GPU 0\"}"
	else
		args="--backend gloo --device cpu"
		emit "{\"check\": \"nccl\", \"result\": \"skipped\", \"detail\": \"torch has no CUDA here: gloo groups, the copies on CPU\"}"
	fi
	note="$py, $how, $args"
	# shellcheck disable=SC2086 # args are words
	run torch 120 env PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" "$py" "$script" $args --out "$out"
	note=""
}

# ---- summary ----

# The ratios, from the JSON lines (our writer's: "key": value, in order).
ratios() {
	awk '
	function field(line, key,   v) {
		if (!match(line, "\"" key "\": (\"[^\"]*\"|[^,}]*)"))
			return ""
		v = substr(line, RSTART + length(key) + 4, RLENGTH - length(key) - 4)
		gsub(/^"|"$/, "", v)
		return v
	}
	function x(a, b) { return b > 0 ? sprintf(" (%.2fx)", a / b) : "" }
	function human(b) { b += 0; return b >= 1073741824 ? sprintf("%g GiB", b / 1073741824) : sprintf("%g MiB", b / 1048576) }
	/"bench": "(h2d|d2h)_kv_block"/ && field($0, "size") == 1124352 {
		dir = substr(field($0, "bench"), 1, 3)
		m = field($0, "mechanism")
		if (!((dir, m) in gbs)) { order[dir] = order[dir] " " m }
		gbs[dir, m] = field($0, "median") + 0
		pages[m] = field($0, "pages_obtained")
	}
	/"check": "memory_type"/ {
		m = field($0, "mechanism")
		if (!(m in mtype)) { morder = morder " " m }
		mtype[m] = field($0, "memory_type") " (is_pinned " field($0, "torch_is_pinned") ")"
	}
	/"check": "pinning"/ {
		sz = field($0, "size"); m = field($0, "mechanism")
		if (!(sz in pseen)) { pseen[sz] = 1; porder = porder " " sz }
		pin[sz, m] = field($0, "result") == "pass" ? field($0, "pin_s_per_gib") + 0 : -1
		why[sz, m] = field($0, "what") ": " field($0, "error")
	}
	/"check": "populate"/ {
		k = field($0, "size") " " field($0, "pages")
		if (!(k in qseen)) { qseen[k] = 1; qorder = qorder "|" k }
		if (field($0, "result") == "pass") {
			f = field($0, "files") + 0
			if (f == 1) one[k] = field($0, "gb_s") + 0
			else { many[k] = field($0, "gb_s") + 0; nfiles[k] = f }
			threads[k] = field($0, "threads"); got[k] = field($0, "pages_obtained")
		} else { qwhy[k] = field($0, "result") ": " field($0, "error") }
	}
	/"bench": "host_register_time"/ {
		regs = regs sprintf("\n  %s on %s, %s ranks at once: median %.4f s (%.4f s per GiB)",
			human(field($0, "size")), field($0, "pages_obtained"), field($0, "ranks"),
			field($0, "median"), field($0, "median") / (field($0, "size") / 1073741824))
	}
	/"check": "torch_view"/ {
		views = views sprintf("\n  rank %s %-14s is_pinned %-5s driver %-22s h2d %s, d2h %s",
			field($0, "rank"), field($0, "memory"), field($0, "is_pinned"), field($0, "driver"),
			field($0, "h2d_async") == "true" ? "async" : "done at return",
			field($0, "d2h_async") == "true" ? "async" : "done at return")
	}
	END {
		for (d = 0; d < 2; d++) {
			dir = d ? "d2h" : "h2d"
			if (order[dir] == "") continue
			ref = gbs[dir, "cuMemHostAlloc"]
			printf "%s of one MLA block run (1124352 B), median GB/s (x of cuMemHostAlloc):\n", dir
			n = split(order[dir], ms, " ")
			for (i = 1; i <= n; i++)
				printf "  %-28s %8.2f%s on %s\n", ms[i], gbs[dir, ms[i]], x(gbs[dir, ms[i]], ref), pages[ms[i]]
		}
		if (morder != "") {
			print "memory type the driver reports (what torch is_pinned() answers):"
			n = split(morder, ms, " ")
			for (i = 1; i <= n; i++) printf "  %-28s %s\n", ms[i], mtype[ms[i]]
		}
		if (porder != "") print "pinning, s per GiB (VMM create+export+import as x of cuMemHostRegister):"
		n = split(porder, ss, " ")
		for (i = 1; i <= n; i++) {
			r = pin[ss[i], "cuMemHostRegister"]; v = pin[ss[i], "cuMemCreate+export+import"]
			printf "  %8s: register %s, vmm %s%s\n", human(ss[i]),
				r < 0 ? "refused (" why[ss[i], "cuMemHostRegister"] ")" : sprintf("%.4f", r),
				v < 0 ? "refused (" why[ss[i], "cuMemCreate+export+import"] ")" : sprintf("%.4f", v),
				(r > 0 && v >= 0) ? x(v, r) : ""
		}
		if (regs != "") print "cuMemHostRegister by every rank at once:" regs
		if (qorder != "") print "populate, GB/s with a thread per core (one file per thread as x of one file):"
		n = split(substr(qorder, 2), ks, "|")
		for (i = 1; i <= n; i++) {
			split(ks[i], kp, " ")
			if (ks[i] in one && ks[i] in many)
				printf "  %8s %-10s 1 file %.2f, %d files %.2f%s, %s threads, on %s\n",
					human(kp[1]), kp[2], one[ks[i]], nfiles[ks[i]], many[ks[i]],
					x(many[ks[i]], one[ks[i]]), threads[ks[i]], got[ks[i]]
			else
				printf "  %8s %-10s %s\n", human(kp[1]), kp[2], qwhy[ks[i]]
		}
		if (views != "")
			print "torch over each kind of memory: is_pinned(), the driver memory type, non_blocking copies:" views
	}' "$out"
}

summary() {
	local fails skips mismatches refused driver_refused driver
	fails=$(grep -c '"result": "fail"' "$out")
	skips=$(grep -c '"result": "skipped"' "$out")
	driver=$(grep '"check": "driver"' "$out" | sed -n 's/.*"driver_version": \([0-9]*\).*"devices": \([0-9]*\).*/driver \1, \2 device(s)/p')
	driver_refused=$(grep '"check": "rule"' "$out" | grep -v '"result": "CUDA_SUCCESS"' | sed 's/.*"call": "\([^"]*\)", "result": "\([^"]*\)".*/\1: \2/')
	mismatches=$(grep '"matches_fake": false' "$out" | sed 's/.*"rule": "\([^"]*\)".*"result": "\([^"]*\)".*"fake": "\([^"]*\)".*/\1: driver \2, fake \3/')
	refused=$(grep -E '"result": "refused"' "$out" | sed 's/.*"check": "\([^"]*\)".*"what": "\([^"]*\)".*"error": "\([^"]*\)".*/\1: \2 (\3)/' | sort | uniq -c | sed 's/^ *1 //; s/^ *\([0-9]*\) \(.*\)/\2, \1 times/')
	emit "{\"check\": \"summary\", \"failed\": $fails, \"skipped\": $skips, \"seconds\": $((SECONDS - started))}"
	echo
	echo "== summary: $fails failed, $skips skipped, $((SECONDS - started)) s; results in $out"
	echo "${driver:-no CUDA driver}; $(grep '"check": "machine"' "$out" | sed 's/.*\("gvisor": [a-z]*, "firecracker": [a-z]*\).*/\1/' | tr -d '"')"
	if [ -n "$refused" ]; then
		echo "refused by the OS or the sandbox:"
		printf '%s\n' "$refused" | sed 's/^/  refused: /'
	else
		echo "refused by the OS or the sandbox: nothing"
	fi
	if [ -n "$driver_refused" ]; then
		echo "refused by the driver:"
		printf '%s\n' "$driver_refused" | sed 's/^/  /'
	fi
	if [ -n "$mismatches" ]; then
		echo "where the fake driver differs from this driver:"
		printf '%s\n' "$mismatches" | sed 's/^/  /'
	fi
	grep '"check": "library_probe"' "$out" | sed 's/.*"ordinal": \([0-9]*\).*"host_vmm_works": \([-0-9]*\).*"fabric_works": \([-0-9]*\).*"supported": "\([^"]*\)".*/library: device \1 host_vmm_works=\2 fabric_works=\3; cuda backend: \4/'
	ratios
	[ "$fails" -eq 0 ]
}

bin=""
abi_check
build
machine
sizes_step
if [ -x "$bin" ]; then
	run env 60 "$bin" env
	run variants 90 "$bin" variants "$size"
	run copy 90 "$bin" copy "$size" "$reps"
	# shellcheck disable=SC2086 # sizes are words
	run pinning 100 "$bin" pinning $pin_sizes
fi
torch_step
if [ -x "$bin" ]; then
	pool_grow "$reg_size"
	run register 60 "$bin" register "$reg_size" "$reps" "$ranks"
	pool_restore
	# shellcheck disable=SC2086 # sizes are words
	pool_grow "$(largest $pop_sizes)"
	# shellcheck disable=SC2086 # sizes are words
	run populate 90 "$bin" populate $pop_sizes
	pool_restore
else
	step gpu_check skipped "no sseg_gpu_check binary" 0
fi
summary
