#!/usr/bin/env bash
# The checks that need a real NVIDIA GPU, in one short run (a few minutes on
# an H200): probe; two processes sharing with memfd + host registration and
# with the cuda backend, copy bandwidth against a cuMemHostAlloc buffer of
# the same size; cuMemHostRegister time on 4 KiB against 2 MiB pages.
# Results: one JSON object per line in $OUT/gpu.jsonl (or ./gpu.jsonl).
# Run from the repository root. Needs cmake and a C compiler.
set -euo pipefail
out=${OUT:-.}/gpu.jsonl
size=${SSEG_GPU_SIZE:-1GiB}
reps=${SSEG_GPU_REPS:-5}
: >"$out"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DSSEG_TESTS=OFF >/dev/null
cmake --build build-gpu -j"$(nproc)" >/dev/null
./build-gpu/sharedseg probe --json | tr -d '\n' >>"$out"
echo >>"$out"
failed=0
for backend in memfd cuda; do
	./build-gpu/sseg_gpu_check share "$backend" "$size" "$reps" | tee -a "$out" ||
		{ echo "{\"check\": \"share\", \"backend\": \"$backend\", \"failed\": true}" >>"$out"; failed=1; }
done
# HugeTLB pages for the register timing: ask for what is needed, give it back.
pages=$(( $(numfmt --from=iec "${size%iB}") / 2097152 + 8 ))
saved=$(cat /proc/sys/vm/nr_hugepages)
echo $((saved + pages)) >/proc/sys/vm/nr_hugepages || true
trap 'echo "$saved" >/proc/sys/vm/nr_hugepages' EXIT
./build-gpu/sseg_gpu_check register "$size" 3 | tee -a "$out" ||
	{ echo '{"check": "register", "failed": true}' >>"$out"; failed=1; }
echo "results in $out"
exit $failed
