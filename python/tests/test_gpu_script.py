# SPDX-License-Identifier: Apache-2.0
"""python/tests/gpu_nccl.py, the NCCL checks for a GPU machine, run here
with gloo on CPU tensors: the same script, the same checks (less the
host-registration copy, and the offload region unpinned), so its logic is
tested where no GPU is."""
import json
import subprocess
import sys

from conftest import TESTS, env_with_package


def test_the_gpu_script_passes_on_gloo(tmp_path):
    out = tmp_path / "gpu.jsonl"
    done = subprocess.run([sys.executable, f"{TESTS}/gpu_nccl.py", "--backend", "gloo",
                           "--out", str(out)], env=env_with_package(), capture_output=True,
                          text=True, timeout=180)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert done.returncode == 0, done.stdout + done.stderr + json.dumps(lines, indent=1)
    assert [line["check"] for line in lines] == [
        "python_gloo_store_share", "python_gloo_store_timeout", "python_gloo_collective_share",
        "python_gloo_collective_timeout", "python_gloo_offload_region"]
    assert all(line["schema"] == 1 and line["ok"] is True for line in lines)
    late = lines[3]["ranks"][0]
    assert late["pending_completed"] is True and late["all_reduce_after"] is True
    region = lines[4]["ranks"]
    assert all(r["none"]["copies"] == [True, True] and r["none"]["pinned"] is False
               for r in region)
