#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# fetch_vllm033.sh PYTHON OUT: vLLM 0.33.0's shared_offload_region.py into
# OUT, taken from PyPI's wheel (downloaded with PYTHON's pip, not
# installed, then removed): bench/vllmbench.py's 0.33 baseline.
set -eu
python=$1 out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetching vLLM 0.33.0's region (PyPI's wheel, for the bench's baseline)" >&2
"$python" -m pip download -q --disable-pip-version-check --no-deps -d "$tmp" vllm==0.33.0
mkdir -p "$(dirname "$out")"
"$python" - "$tmp" "$out" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(f"{sys.argv[1]}/vllm-0.33.0-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    data = z.read("vllm/v1/kv_offload/cpu/shared_offload_region.py")
with open(sys.argv[2] + ".part", "wb") as f:
    f.write(data)
PY
mv "$out.part" "$out"
