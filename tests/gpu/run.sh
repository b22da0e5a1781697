#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The checks that need a real NVIDIA GPU, in one run of under 5 minutes (one
# H200, 16 cores). Every step runs whatever happened before it, within what
# is left of the time budget, and reports JSON lines; nothing the machine
# lacks or refuses (no cuda.h, a read-only /proc/sys/vm/nr_hugepages, a
# sandbox) stops the run: it is reported as skipped or refused.
#
# Steps: the CUDA ABI check against the installed cuda.h; the build; the
# machine (kernel, gVisor or Firecracker clues, container, THP and HugeTLB
# knobs); gpu_check env (driver, devices, what the OS and driver refuse,
# each next to what the project's fake driver answers, and what the
# library's own probes conclude); sharing variants; KV-block copies against
# cuMemHostAlloc; cuMemHostRegister time on 4 KiB and 2 MiB pages; the
# Python NCCL check when there is one. Results: $OUT/gpu.jsonl (./gpu.jsonl
# without OUT), then a short summary.
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
#   SSEG_GPU_SIZE      segment size for variants and copies (1GiB)
#   SSEG_GPU_REG_SIZE  bytes registered per rank (1GiB)
#   SSEG_GPU_REPS      repetitions of each measurement (5)
#   SSEG_GPU_RANKS     ranks registering at once (4)
#   SSEG_GPU_BUDGET    seconds for the whole run (280)
#   SSEG_GPU_BUILD     an existing build directory instead of building one
#   SSEG_GPU_POOL=0    never touch /proc/sys/vm/nr_hugepages
#   CUDA_HOME          where to look for cuda.h first
#   SHAREDSEG_CUDA_LIBRARY  another driver library (the fake, in test_gpu_check)
set -u -o pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out_dir=${OUT:-.}
mkdir -p "$out_dir"
out="$out_dir/gpu.jsonl"
size=${SSEG_GPU_SIZE:-1GiB}
reg_size=${SSEG_GPU_REG_SIZE:-1GiB}
reps=${SSEG_GPU_REPS:-5}
ranks=${SSEG_GPU_RANKS:-4}
budget=${SSEG_GPU_BUDGET:-280}
work=$(mktemp -d)
started=$SECONDS
pool_saved=""
: >"$out"

cleanup() {
	if [ -n "$pool_saved" ]; then
		echo "$pool_saved" >/proc/sys/vm/nr_hugepages 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

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

# run NAME LIMIT CMD...: runs CMD within LIMIT seconds (less if the budget
# is nearly spent); its JSON lines join $out, its stderr is kept.
run() {
	local name=$1 limit=$2 t0=$SECONDS rc=0 avail
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
		step "$name" pass "" $((SECONDS - t0))
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

# ---- HugeTLB pages for the 2 MiB registration timing ----

# Asks for the pages the registration needs, if the knob can be written; a
# missing or read-only knob is a skipped HugeTLB case, never a failure.
pool_grow() {
	local bytes need cur
	[ "${SSEG_GPU_POOL:-1}" = 0 ] && return 0
	cur=$(cat /proc/sys/vm/nr_hugepages 2>/dev/null) || return 0
	bytes=$(numfmt --from=iec "${reg_size%iB}" 2>/dev/null) || return 0
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

# ---- the Python NCCL check (written separately; run when it is there) ----

nccl_hook() {
	local script="$root/python/tests/gpu_nccl.py"
	if [ ! -f "$script" ]; then
		emit '{"check": "nccl", "result": "skipped", "detail": "python/tests/gpu_nccl.py does not exist yet"}'
		step nccl skipped "no python/tests/gpu_nccl.py" 0
		return 0
	fi
	# The first interpreter whose torch sees a GPU: SSEG_GPU_PYTHON, then
	# PATH's, Debian's, the PyPI test environment's.
	local py="" cand tried=""
	for cand in ${SSEG_GPU_PYTHON:-} python3 /usr/bin/python3 \
		"${XDG_CACHE_HOME:-$HOME/.cache}/sharedseg/venv-pypi/bin/python"; do
		command -v "$cand" >/dev/null 2>&1 || continue
		tried="$tried $cand"
		if "$cand" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
			py=$cand
			break
		fi
	done
	if [ -z "$py" ]; then
		emit "{\"check\": \"nccl\", \"result\": \"skipped\", \"detail\": \"no interpreter with a CUDA torch (tried:$tried); set SSEG_GPU_PYTHON\"}"
		step nccl skipped "no torch with CUDA (tried:$tried)" 0
		return 0
	fi
	# The extension is built for that interpreter first (through CMake, as
	# the library is); the script appends its own JSON lines to $out.
	run nccl_build 120 make -C "$root" --no-print-directory python PYTHON="$py"
	run nccl 90 env PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" "$py" "$script" --out "$out"
}

# ---- summary ----

summary() {
	local fails skips mismatches refused driver_refused driver
	fails=$(grep -c '"result": "fail"' "$out")
	skips=$(grep -c '"result": "skipped"' "$out")
	driver=$(grep '"check": "driver"' "$out" | sed -n 's/.*"driver_version": \([0-9]*\).*"devices": \([0-9]*\).*/driver \1, \2 device(s)/p')
	driver_refused=$(grep '"check": "rule"' "$out" | grep -v '"result": "CUDA_SUCCESS"' | sed 's/.*"call": "\([^"]*\)", "result": "\([^"]*\)".*/\1: \2/')
	mismatches=$(grep '"matches_fake": false' "$out" | sed 's/.*"rule": "\([^"]*\)".*"result": "\([^"]*\)".*"fake": "\([^"]*\)".*/\1: driver \2, fake \3/')
	refused=$(grep -E '"result": "refused"' "$out" | sed 's/.*"what": "\([^"]*\)".*"error": "\([^"]*\)".*/\1 (\2)/' | tr '\n' ' ')
	emit "{\"check\": \"summary\", \"failed\": $fails, \"skipped\": $skips, \"seconds\": $((SECONDS - started))}"
	echo
	echo "== summary: $fails failed, $skips skipped, $((SECONDS - started)) s; results in $out"
	echo "${driver:-no CUDA driver}; $(grep '"check": "machine"' "$out" | sed 's/.*\("gvisor": [a-z]*, "firecracker": [a-z]*\).*/\1/' | tr -d '"')"
	[ -n "$refused" ] && echo "refused by the OS: $refused"
	if [ -n "$driver_refused" ]; then
		echo "refused by the driver:"
		printf '%s\n' "$driver_refused" | sed 's/^/  /'
	fi
	if [ -n "$mismatches" ]; then
		echo "where the fake driver differs from this driver:"
		printf '%s\n' "$mismatches" | sed 's/^/  /'
	fi
	grep '"check": "library_probe"' "$out" | sed 's/.*"ordinal": \([0-9]*\).*"host_vmm_works": \([-0-9]*\).*"fabric_works": \([-0-9]*\).*"supported": "\([^"]*\)".*/library: device \1 host_vmm_works=\2 fabric_works=\3; cuda backend: \4/'
	grep '"schema": 1' "$out" | sed 's/.*"bench": "\([^"]*\)", "mechanism": "\([^"]*\)", "ranks": \([0-9]*\), "size": \([0-9]*\).*"pages_obtained": "\([^"]*\)".*"unit": "\([^"]*\)".*"median": \([^,]*\),.*/  \1 \2 ranks=\3 size=\4 pages=\5: median \7 \6/'
	[ "$fails" -eq 0 ]
}

bin=""
abi_check
build
machine
if [ -x "$bin" ]; then
	run env 60 "$bin" env
	run variants 90 "$bin" variants "$size"
	run copy 90 "$bin" copy "$size" "$reps"
	pool_grow
	run register 60 "$bin" register "$reg_size" "$reps" "$ranks"
	pool_restore
else
	step gpu_check skipped "no sseg_gpu_check binary" 0
fi
nccl_hook
summary
