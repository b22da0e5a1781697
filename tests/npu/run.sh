#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# shellcheck disable=SC2317 # the steps are functions run through bash -c
# The checks that need a real Ascend NPU (Atlas A2/A3), prepared but never
# run: nothing in this project has run on NPU hardware yet. One short run:
# the environment, the probe, the ABI against the toolkit's acl_rt.h, a
# 4-rank demo with each handle type (fabric where the runtime makes one,
# then the in-server handle with its pid trust list), two processes sharing
# with copy bandwidth against an aclrtMallocHost buffer (ascend backend
# with each handle type, memfd + aclrtHostRegister), and host registration
# in the demo. No step aborts the rest: each is bounded by a timeout and
# recorded, failed or not, as one JSON object per line in $OUT/npu.jsonl
# (or ./npu.jsonl); what was refused is printed at the end.
# Run from the repository root with the CANN runtime's environment set
# (source /usr/local/Ascend/ascend-toolkit/set_env.sh). Needs cmake and cc.
set -u
out=${OUT:-.}/npu.jsonl
size=${SSEG_NPU_SIZE:-1GiB}
reps=${SSEG_NPU_REPS:-5}
limit=${SSEG_NPU_STEP_S:-300}
build="build-npu"
: >"$out"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# A JSON string of a file's text: one line, quotes and backslashes escaped.
json_text() {
	tail -c 2000 "$1" | tr '\n\t\r' '   ' | sed 's/\\/\\\\/g; s/"/\\"/g; s/[[:cntrl:]]//g'
}

# step NAME COMMAND...: runs COMMAND under the timeout and records it; its
# stdout is kept as "result" when it is JSON: one document (the CLI's), or
# one object per line (npu_check's, kept as a list).
step() {
	local name=$1 status result
	shift
	echo "== $name: $*"
	# bash -c, so that a step may be one of the functions below.
	timeout "$limit" bash -c '"$@"' "$name" "$@" >"$log.out" 2>"$log"
	status=$?
	if grep -q '^{"check"' "$log.out"; then
		result="[$(paste -sd, "$log.out")]"
	elif [ "$(head -c1 "$log.out")" = "{" ]; then
		result=$(tr -d '\n' <"$log.out")
	else
		result=null
	fi
	# A step cut by its timeout may leave half a document: kept as text.
	if [ "$result" != null ] && command -v python3 >/dev/null &&
		! printf '%s' "$result" | python3 -c 'import json, sys; json.load(sys.stdin)' 2>/dev/null; then
		result="\"$(json_text "$log.out")\""
	fi
	printf '{"check": "%s", "status": %d, "result": %s, "stderr": "%s"}\n' \
		"$name" "$status" "$result" "$(json_text "$log")" >>"$out"
	[ "$status" -eq 0 ] || echo "   refused or failed (status $status): $(tail -n 3 "$log")"
	rm -f "$log.out"
	return 0
}

environment() {
	printf '{"kernel": "%s", "npu_smi": %s, "toolkit": "%s", "libascendcl": "%s"}\n' \
		"$(uname -r)" "$(command -v npu-smi >/dev/null && echo true || echo false)" \
		"${ASCEND_TOOLKIT_HOME:-}" \
		"$(ldconfig -p 2>/dev/null | grep -m1 -o '/[^ ]*libascendcl.so' || true)"
	command -v npu-smi >/dev/null && npu-smi info >&2
	return 0
}

build_all() {
	cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSSEG_TESTS=OFF >&2 &&
		cmake --build "$build" -j"$(nproc)" >&2 &&
		cc -std=gnu11 -O2 -Iinclude tests/npu/npu_check.c "$build/libsharedseg.a" \
			-ldl -lpthread -o "$build/npu_check" >&2
}

# The toolkit's own acl_rt.h against our declarations.
abi() {
	local inc=${ASCEND_TOOLKIT_HOME:-/usr/local/Ascend/ascend-toolkit/latest}/include
	[ -f "$inc/acl/acl_rt.h" ] || { echo "no acl_rt.h under $inc" >&2; return 77; }
	cc -std=gnu11 -DSSEG_HAVE_ACL_H -Isrc -Itests -isystem "$inc" tests/test_ascend_abi.c \
		tests/ascend_abi_toolkit.c -o "$build/test_ascend_abi" >&2 &&
		"$build/test_ascend_abi" >&2
}

export build
export -f environment build_all abi
step environment environment
step build build_all
if [ ! -x "$build/sharedseg" ]; then
	echo "the build failed: nothing else can run (see $out)"
	exit 1
fi
step probe "$build/sharedseg" probe --json
step abi abi
step demo-default-handle "$build/sharedseg" demo --backend ascend --ranks 4 --size "$size" --json
step demo-trust-list env SSEG_ASCEND_FABRIC=0 \
	"$build/sharedseg" demo --backend ascend --ranks 4 --size "$size" --json
step demo-host-register "$build/sharedseg" demo --ranks 4 --size "$size" --pages base \
	--host-register --json
if [ -x "$build/npu_check" ]; then
	step share-default-handle "$build/npu_check" share ascend "$size" "$reps"
	step share-trust-list env SSEG_ASCEND_FABRIC=0 "$build/npu_check" share ascend "$size" "$reps"
	step share-host-register "$build/npu_check" share memfd "$size" "$reps"
fi
echo
echo "results in $out; refused or failed:"
grep -v '"status": 0,' "$out" | cut -c1-400 || echo "   nothing"
exit 0
