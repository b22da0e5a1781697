#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# shellcheck disable=SC2317 # the steps are functions run through bash -c
# The checks that need a real Ascend NPU (Atlas A2/A3), prepared but never
# run on one: nothing in this project has run on NPU hardware yet. One
# short run: the environment, first the raw runtime calls the backend's
# choices rest on (docs/ascend.md, findings 1-4: two access descriptors, a
# host entry on owner and peer, device access to host memory over HCCS or
# PCIe, V1 and V2 import of host memory), the probe, the ABI against the toolkit's
# acl_rt.h, a 4-rank demo with each handle type (fabric where the runtime
# makes one, then the in-server handle with its pid trust list), two
# processes sharing with copy bandwidth against an aclrtMallocHost buffer
# (ascend backend with each handle type, memfd + aclrtHostRegister), and
# host registration in the demo. No step aborts the rest: each is bounded
# by a timeout and by what is left of the run's budget, and recorded,
# failed or not, as one JSON object per line in $OUT/npu.jsonl (or
# ./npu.jsonl), then a summary line; what was refused is printed at the
# end. The exit status is 1 when a step failed.
#
# Through the project's fake ACL runtime (SHAREDSEG_ACL_LIBRARY, as
# test_npu_check runs it) every line says "fake_runtime": true: such a run
# shows that the script and npu_check work, nothing about an NPU.
#
# Run with the CANN runtime's environment set
# (source /usr/local/Ascend/ascend-toolkit/set_env.sh). Needs cmake and cc
# unless SSEG_NPU_BUILD names a build.
#
# Environment (all optional):
#   OUT                  JSON lines go to $OUT/npu.jsonl
#   SSEG_NPU_SIZE        segment size of the demos and shares (1GiB)
#   SSEG_NPU_REPS        repetitions of each copy (5)
#   SSEG_NPU_STEP_S      seconds one step may take (300)
#   SSEG_NPU_BUDGET      seconds for the whole run (600)
#   SSEG_NPU_BUILD       an existing build directory (sharedseg and
#                        sseg_npu_check) instead of building build-npu
#   ASCEND_TOOLKIT_HOME  where acl/acl_rt.h is looked for
#   SHAREDSEG_ACL_LIBRARY     another ACL runtime (the fake, in test_npu_check)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
out_dir=${OUT:-.}
mkdir -p "$out_dir"
out=$out_dir/npu.jsonl
size=${SSEG_NPU_SIZE:-1GiB}
reps=${SSEG_NPU_REPS:-5}
step_s=${SSEG_NPU_STEP_S:-300}
budget=${SSEG_NPU_BUDGET:-600}
started=$SECONDS
work=$(mktemp -d)
log=$work/step
: >"$out"
trap 'rm -rf "$work"' EXIT

# SSEG_ACL_LIBRARY is the name before 0.3, still read (as the library does).
if [ -z "${SHAREDSEG_ACL_LIBRARY:-}" ] && [ -n "${SSEG_ACL_LIBRARY:-}" ]; then
	export SHAREDSEG_ACL_LIBRARY=$SSEG_ACL_LIBRARY
fi

# The fake ACL runtime exports its control functions: a run through it
# must never read as a run on an NPU.
fake_runtime=false
if [ -n "${SHAREDSEG_ACL_LIBRARY:-}" ] && grep -qa sseg_fake_acl_ "$SHAREDSEG_ACL_LIBRARY" 2>/dev/null; then
	fake_runtime=true
fi

# A JSON string of a file's text: one line, quotes and backslashes escaped.
json_text() {
	tail -c 2000 "$1" | tr '\n\t\r' '   ' | sed 's/\\/\\\\/g; s/"/\\"/g; s/[[:cntrl:]]//g'
}

left() {
	echo $((budget - (SECONDS - started)))
}

record() { # NAME STATUS OUTCOME SECONDS RESULT STDERR-FILE
	printf '{"check": "%s", "status": %d, "outcome": "%s", "seconds": %d, "fake_runtime": %s, "result": %s, "stderr": "%s"}\n' \
		"$1" "$2" "$3" "$4" "$fake_runtime" "$5" "$(json_text "$6")" >>"$out"
}

# The step's stdout as JSON when it is: one document (the CLI's), or one
# object per line (npu_check's, kept as a list); else null. A step cut by
# its timeout may leave half a document: kept as text.
step_result() {
	local result
	if grep -q '^{"check"' "$log.out"; then
		result="[$(grep '^{' "$log.out" | paste -sd, -)]"
	elif [ "$(head -c1 "$log.out")" = "{" ]; then
		result=$(tr -d '\n' <"$log.out")
	else
		result=null
	fi
	if [ "$result" != null ] && command -v python3 >/dev/null &&
		! printf '%s' "$result" | python3 -c 'import json, sys; json.load(sys.stdin)' 2>/dev/null; then
		result="\"$(json_text "$log.out")\""
	fi
	printf '%s' "$result"
}

# step NAME COMMAND...: runs COMMAND within the step's limit (less when
# the budget is nearly spent) and records it: exit 0 passes, 77 is
# skipped, anything else (a timeout too) fails.
step() {
	local name=$1 status limit outcome t0=$SECONDS
	shift
	limit=$(left)
	if [ "$limit" -lt 5 ]; then
		echo "out of time" >"$log"
		record "$name" -1 skipped 0 null "$log"
		echo "== $name: skipped, out of time"
		return 0
	fi
	[ "$limit" -gt "$step_s" ] && limit=$step_s
	echo "== $name: $*"
	# bash -c, so that a step may be one of the functions below.
	timeout --kill-after=5 "$limit" bash -c '"$@"' "$name" "$@" >"$log.out" 2>"$log"
	status=$?
	case $status in
	0) outcome=pass ;;
	77) outcome=skipped ;;
	124 | 137) outcome=fail && echo "timed out after ${limit}s" >>"$log" ;;
	*) outcome=fail ;;
	esac
	record "$name" "$status" "$outcome" $((SECONDS - t0)) "$(step_result)" "$log"
	[ "$status" -eq 0 ] || echo "   $outcome (status $status): $(tail -n 3 "$log")"
	rm -f "$log.out"
	return 0
}

environment() {
	printf '{"kernel": "%s", "npu_smi": %s, "toolkit": "%s", "libascendcl": "%s", "acl_library": "%s", "fake_runtime": %s}\n' \
		"$(uname -r)" "$(command -v npu-smi >/dev/null && echo true || echo false)" \
		"${ASCEND_TOOLKIT_HOME:-}" \
		"$(ldconfig -p 2>/dev/null | grep -m1 -o '/[^ ]*libascendcl.so' || true)" \
		"${SHAREDSEG_ACL_LIBRARY:-}" "$fake_runtime"
	if command -v npu-smi >/dev/null; then
		npu-smi info >&2
	fi
	return 0
}

build_all() {
	cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSSEG_TESTS=OFF >&2 &&
		cmake --build "$build" -j"$(nproc)" --target sseg_cli sseg_npu_check >&2
}

# The toolkit's own acl_rt.h against our declarations.
abi() {
	local inc=${ASCEND_TOOLKIT_HOME:-/usr/local/Ascend/ascend-toolkit/latest}/include
	[ -f "$inc/acl/acl_rt.h" ] || { echo "no acl_rt.h under $inc" >&2; return 77; }
	cc -std=gnu11 -DSSEG_HAVE_ACL_H -I"$root/src" -I"$root/tests" -isystem "$inc" \
		"$root/tests/test_ascend_abi.c" "$root/tests/abi/ascend_abi_toolkit.c" \
		-o "$work/test_ascend_abi" >&2 &&
		"$work/test_ascend_abi" >&2
}

summary() {
	local fails skips others
	fails=$(grep -c '"outcome": "fail"' "$out")
	skips=$(grep -c '"outcome": "skipped"' "$out")
	printf '{"check": "summary", "failed": %d, "skipped": %d, "seconds": %d, "fake_runtime": %s}\n' \
		"$fails" "$skips" $((SECONDS - started)) "$fake_runtime" >>"$out"
	echo
	echo "== summary: $fails failed, $skips skipped, $((SECONDS - started)) s; results in $out"
	if [ "$fake_runtime" = true ]; then
		echo "through the project's fake ACL runtime ($SHAREDSEG_ACL_LIBRARY): no NPU took part;" \
			"this says the checks run, nothing about hardware"
	fi
	others=$(grep -v -e '"outcome": "pass"' -e '"check": "summary"' "$out" | cut -c1-400)
	echo "the runtime's answers to the stack checks (findings 1-4):"
	grep -o '{"check": "stack-[^}]*}' "$out" | sed 's/^/   /'
	echo "refused, failed or skipped:"
	echo "${others:-   nothing}"
	grep -o '"copies_skipped": "[^"]\+"' "$out" | sort -u | sed 's/^/   not measured: /'
	[ "$fails" -eq 0 ]
}

export root work fake_runtime
export -f environment build_all abi
step environment environment
build=${SSEG_NPU_BUILD:-}
if [ -n "$build" ] && [ -x "$build/sharedseg" ] && [ -x "$build/sseg_npu_check" ]; then
	echo "using $build" >"$log"
	record build 0 pass 0 null "$log"
else
	build=$root/build-npu
	export build
	step build build_all
fi
if [ ! -x "$build/sharedseg" ]; then
	summary
	echo "the build failed: nothing else can run (see $out)"
	exit 1
fi
if [ -x "$build/sseg_npu_check" ]; then
	step stack "$build/sseg_npu_check" stack
fi
step probe "$build/sharedseg" probe --json
step abi abi
step demo-default-handle "$build/sharedseg" demo --backend ascend --ranks 4 --size "$size" --json
step demo-trust-list env SHAREDSEG_ASCEND_FABRIC=0 \
	"$build/sharedseg" demo --backend ascend --ranks 4 --size "$size" --json
step demo-host-register "$build/sharedseg" demo --ranks 4 --size "$size" --pages base \
	--host-register --json
if [ -x "$build/sseg_npu_check" ]; then
	step share-default-handle "$build/sseg_npu_check" share ascend "$size" "$reps"
	step share-trust-list env SHAREDSEG_ASCEND_FABRIC=0 \
		"$build/sseg_npu_check" share ascend "$size" "$reps"
	step share-host-register "$build/sseg_npu_check" share memfd "$size" "$reps"
else
	echo "no $build/sseg_npu_check" >"$log"
	record share 1 fail 0 null "$log"
fi
summary
