# SPDX-License-Identifier: Apache-2.0
"""tests/gpu/run.sh, the device script, run here as it runs on a GPU
machine: through the project's fake CUDA driver (the C steps) and with
this interpreter's torch (the torch step: python/tests/gpu_nccl.py, on
gloo with CPU tensors where torch has no CUDA). What is checked is what a
reader of the run sees: a line per step, then the summary's refusals and
ratios; and the torch step's JSON lines. The numbers themselves mean
nothing through the fake."""
import json
import re
import subprocess
import sys

from conftest import ROOT, built, doc_block, env_with_package, machine_lock

STEPS = ["abi", "build", "machine", "env", "variants", "copy", "pinning", "torch", "register",
         "populate"]
STEP = re.compile(r"^(\w+)\s+(pass|fail|skipped)\s*(.*)$")


def run_script(out):
    fake = built("libsseg_fake_cuda.so", "the fake CUDA driver")
    env = env_with_package(
        OUT=str(out), SSEG_GPU_BUILD=fake.rsplit("/", 1)[0], SHAREDSEG_CUDA_LIBRARY=fake,
        SSEG_FAKE_CUDA="devices=1", SSEG_GPU_SIZE="16MiB", SSEG_GPU_REG_SIZE="8MiB",
        SSEG_GPU_REPS="2", SSEG_GPU_RANKS="2", SSEG_GPU_POOL="0", SSEG_GPU_PAGES="base",
        SSEG_GPU_PIN_SIZES="8MiB 16MiB", SSEG_GPU_POP_SIZES="16MiB", SSEG_GPU_PYTHON=sys.executable,
        SSEG_GPU_BUDGET="240")
    # The script writes the THP and HugeTLB knobs back to see whether it may.
    with machine_lock(exclusive=True):
        return subprocess.run(["bash", f"{ROOT}/tests/gpu/run.sh"], env=env, capture_output=True,
                              text=True, timeout=400)


def normalised(line):
    """A line with its numbers as N, its spaces as one, and the page kind a
    figure was measured on as PAGES (the host's knobs choose it: make
    test-host-states runs this with huge pages on)."""
    line = re.sub(r"\d+(\.\d+)?", "N", line)
    return " ".join(re.sub(r"\bon [A-Za-z-]+(:N)?", "on PAGES", line).split())


def section(text, title):
    """The indented lines under the summary line that starts with title."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        rows.append(line.strip())
    return rows


def test_the_device_script_runs_clean_through_the_fake(tmp_path):
    done = run_script(tmp_path)
    text = done.stdout
    assert done.returncode == 0, text + done.stderr
    head, summary = text.split("\n== summary: ", 1)
    steps = [STEP.match(line).groups() for line in head.splitlines() if line.strip()]
    assert [s[0] for s in steps] == STEPS, text
    assert all(s[1] == "pass" for s in steps), text
    torch_detail = dict((s[0], s[2]) for s in steps)["torch"]
    assert sys.executable in torch_detail and "the built sharedseg._native" in torch_detail
    assert summary.startswith("0 failed"), summary
    # docs/testing.md's excerpt of this run, numbers aside, OUT as the doc's
    printed = {normalised(line.replace(str(tmp_path), "/tmp/gpu")) for line in text.splitlines()}
    shown = [line for line in doc_block("python/tests/test_gpu_script.py",
                                         "docs/testing.md").splitlines() if line.strip()]
    assert shown and [line for line in shown if normalised(line) not in printed] == [], text
    assert re.search(r"^refused by the OS or the sandbox: ", summary, re.M)

    for direction in ("h2d", "d2h"):
        rows = section(summary, f"{direction} of one MLA block run (1124352 B)")
        ratios = {r.split()[0]: r for r in rows}
        assert sorted(ratios) == ["cuMemHostAlloc", "malloc", "sharedseg-cuda-vmm",
                                  "sharedseg-cuda-vmm-import", "sharedseg-memfd-hostreg"]
        assert "(1.00x) on pinned" in ratios["cuMemHostAlloc"]
        assert ratios["malloc"].endswith("on pageable")
        assert re.search(r"\(\d+\.\d\dx\) on base:4096$", ratios["sharedseg-memfd-hostreg"])
    types = dict(r.split(None, 1) for r in section(summary, "memory type the driver reports"))
    assert types["malloc"] == "unknown to the driver (is_pinned false)"
    assert types["sharedseg-cuda-vmm-import"] == "host (is_pinned true)"
    assert types["sharedseg-memfd-hostreg"] == "host (is_pinned true)"
    pinning = section(summary, "pinning, s per GiB")
    assert [r.split(":")[0] for r in pinning] == ["8 MiB", "16 MiB"]
    assert all(re.search(r"register \d+\.\d+, vmm \d+\.\d+ \(\d+\.\d+x\)$", r) for r in pinning)
    populate = section(summary, "populate, GB/s")
    assert re.match(r"16 MiB base +1 file \d+\.\d+, \d+ files \d+\.\d+ \(\d+\.\d+x\), \d+ threads, "
                    r"on [a-z0-9-]+:\d+$", populate[0]), populate  # shmem_enabled=always makes base THP
    assert [r.split()[2] for r in populate[1:]] == ["thp", "hugetlb-2M"]
    # THP and HugeTLB: measured where the host's knobs and pool allow
    # (make test-host-states), else skipped saying why
    assert all("skipped: " in r or re.search(r" files \d+\.\d+ \(\d+\.\d+x\)", r)
               for r in populate[1:]), populate

    lines = [json.loads(line) for line in (tmp_path / "gpu.jsonl").read_text().splitlines()]
    nccl = [line for line in lines if line.get("check") == "nccl"]
    assert len(nccl) == 1 and nccl[0]["result"] == "skipped"
    assert "torch has no CUDA here" in nccl[0]["detail"] or "one GPU" in nccl[0]["detail"]
    python = [line for line in lines if line.get("check", "").startswith("python_")]
    assert [line["check"] for line in python] == [
        "python_gloo_store_share", "python_gloo_store_timeout", "python_gloo_collective_share",
        "python_gloo_collective_timeout", "python_gloo_offload_region"]
    assert all(line["schema"] == 1 and line["ok"] is True for line in python), python
    late = python[3]["ranks"][0]
    assert late["pending_completed"] is True and late["all_reduce_after"] is True
    region = python[4]["ranks"]
    assert all(r["none"]["copies"] == [True, True] and r["none"]["pinned"] is False
               for r in region)
