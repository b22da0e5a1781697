# SPDX-License-Identifier: Apache-2.0
"""tests/gpu/run.sh, the device script, run here as it runs on a GPU
machine: through the project's fake CUDA driver (the C steps) and with
this interpreter's torch (the torch step: python/tests/helpers/gpu_nccl.py,
on gloo with CPU tensors where torch has no CUDA). What is checked is what a
reader of the run sees: a line per step, then the summary's refusals and
ratios; and the torch step's JSON lines. The numbers themselves mean
nothing through the fake. The rows are sized as on the device, from this
host's cores and MemAvailable (tests/gpu/sizes.sh), so the run shows that
they end within their steps' limits here too; the rule itself is tried for
other hosts through sizes.sh's stand-ins for what it reads."""
import json
import os
import re
import subprocess
import sys

from conftest import ROOT, built, doc_block, env_with_package, machine_lock

STEPS = ["abi", "build", "machine", "sizes", "env", "variants", "copy", "pinning", "torch",
         "register", "populate"]
STEP = re.compile(r"^(\w+)\s+(pass|fail|skipped)\s*(.*)$")
SIZES = re.compile(r"^(?P<host>.+): rows up to (?P<largest>\S+) \((?P<why>.+)\): "
                   r"pinning (?P<pinning>.+), populate (?P<populate>.+), "
                   r"segments (?P<segments>.+), registration (?P<registration>.+)$")


def run_script(out):
    fake = built("libsseg_fake_cuda.so", "the fake CUDA driver")
    env = env_with_package(
        OUT=str(out), SSEG_GPU_BUILD=fake.rsplit("/", 1)[0], SHAREDSEG_CUDA_LIBRARY=fake,
        SSEG_FAKE_CUDA="devices=1", SSEG_GPU_REPS="2", SSEG_GPU_RANKS="2", SSEG_GPU_POOL="0",
        SSEG_GPU_PAGES="base", SSEG_GPU_PYTHON=sys.executable, SSEG_GPU_BUDGET="240")
    for name in ("SSEG_GPU_SIZE", "SSEG_GPU_REG_SIZE", "SSEG_GPU_PIN_SIZES", "SSEG_GPU_POP_SIZES",
                 "SSEG_GPU_HOST_CORES", "SSEG_GPU_HOST_MEMAVAILABLE"):
        env.pop(name, None)
    # The script writes the THP and HugeTLB knobs back to see whether it may.
    with machine_lock(exclusive=True):
        return subprocess.run(["bash", f"{ROOT}/tests/gpu/run.sh"], env=env, capture_output=True,
                              text=True, timeout=400)


def sizes_said(cores=None, available=None, **settings):
    """What tests/gpu/sizes.sh says it chose (parsed) for a host of these
    cores and MemAvailable (this one's where None), and its exit status."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSEG_GPU_")}
    env.update(settings)
    if cores is not None:
        env["SSEG_GPU_HOST_CORES"] = str(cores)
    if available is not None:
        env["SSEG_GPU_HOST_MEMAVAILABLE"] = str(available)
    done = subprocess.run(["bash", f"{ROOT}/tests/gpu/sizes.sh"], env=env, capture_output=True,
                          text=True, timeout=60)
    said = SIZES.match(done.stdout.strip())
    assert said and done.stderr == "", done.stdout + done.stderr
    return said.groupdict(), done.returncode


def spaced(sizes):
    """Sizes as the summary writes them: 512MiB as 512 MiB."""
    return [re.sub(r"(\d)([KMG]iB)$", r"\1 \2", size) for size in sizes.split()]


def normalised(line):
    """A line with its numbers as N and their units as XiB, its spaces as
    one, and the page kind a figure was measured on as PAGES (the host
    chooses the sizes; its knobs choose the pages: make test-host-states
    runs this with huge pages on)."""
    line = re.sub(r"\d+(\.\d+)?", "N", line)
    line = re.sub(r"\bN ?[KMG]iB\b", "N XiB", line)
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
    # the rows were sized from this host, and the run says how, as sizes.sh
    # says for the cores and MemAvailable it read (gpu.jsonl: in bytes)
    sizes = SIZES.match(dict((s[0], s[2]) for s in steps)["sizes"]).groupdict()
    lines = [json.loads(line) for line in (tmp_path / "gpu.jsonl").read_text().splitlines()]
    read = next(line for line in lines if line.get("check") == "sizes")
    assert read["cores"] == len(os.sched_getaffinity(0)) and read["mem_available"] > 0, read
    assert sizes_said(read["cores"], read["mem_available"]) == (sizes, 0)
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
    assert [r.split(":")[0] for r in pinning] == spaced(sizes["pinning"]), (sizes, pinning)
    assert all(re.search(r"register \d+\.\d+, vmm \d+\.\d+ \(\d+\.\d+x\)$", r) for r in pinning)
    populate = section(summary, "populate, GB/s")
    assert [" ".join(r.split()[:3]) for r in populate] == [
        f"{size} {pages}" for size in spaced(sizes["populate"])
        for pages in ("base", "thp", "hugetlb-2M")], (sizes, populate)
    base = populate[::3]
    assert all(re.search(r" base +1 file \d+\.\d+, \d+ files \d+\.\d+ \(\d+\.\d+x\), \d+ threads, "
                         r"on [a-z0-9-]+:\d+$", r) for r in base), populate  # shmem_enabled=always makes base THP
    # THP and HugeTLB: measured where the host's knobs and pool allow
    # (make test-host-states), else skipped saying why
    assert all("skipped: " in r or re.search(r" files \d+\.\d+ \(\d+\.\d+x\)", r)
               for r in populate if r not in base), populate
    registered = section(summary, "cuMemHostRegister by every rank at once")
    assert [r.split(" on ")[0] for r in registered] == spaced(sizes["registration"]), registered

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


DEVICE = {"pinning": "1GiB 8GiB 32GiB", "populate": "8GiB 32GiB", "segments": "1GiB",
          "registration": "1GiB"}


def test_the_rows_are_sized_from_the_host():
    # the device's box: its rows stay
    said, rc = sizes_said(16, "125GiB")
    assert rc == 0 and said["host"] == "16 cores, MemAvailable 125.0GiB"
    assert said["largest"] == "32GiB" and said["why"] == "the largest"
    assert {k: said[k] for k in DEVICE} == DEVICE
    assert sizes_said(16, "64GiB")[0]["largest"] == "32GiB"
    # the same box with less memory free, or fewer cores: the next rows
    for cores, available in ((16, "40GiB"), (8, "125GiB"), (4, "16GiB")):
        said, rc = sizes_said(cores, available)
        assert rc == 0 and said["largest"] == "8GiB", said
        assert said["why"] == "32GiB needs 16 cores and 64GiB available"
        assert (said["pinning"], said["populate"], said["segments"]) == (
            "256MiB 2GiB 8GiB", "2GiB 8GiB", "1GiB"), said
    # this machine's kind (2 cores, 24 GiB), and smaller still
    said, rc = sizes_said(2, "22GiB")
    assert rc == 0 and said["host"] == "2 cores, MemAvailable 22.0GiB"
    assert said["why"] == "8GiB needs 4 cores and 16GiB available"
    assert (said["largest"], said["pinning"], said["populate"], said["segments"],
            said["registration"]) == ("2GiB", "64MiB 512MiB 2GiB", "512MiB 2GiB", "256MiB",
                                      "256MiB"), said
    said, rc = sizes_said(2, "3GiB")
    assert rc == 0 and said["largest"] == "512MiB" and said["pinning"] == "16MiB 128MiB 512MiB"
    said, rc = sizes_said(1, "100MiB")
    assert rc == 0 and said["host"] == "1 core, MemAvailable 100MiB"
    assert said["largest"] == "128MiB" and said["pinning"] == "4MiB 32MiB 128MiB", said
    # a setting wins over its rule, and says so; the others keep theirs
    said, rc = sizes_said(16, "125GiB", SSEG_GPU_PIN_SIZES="8MiB 16MiB", SSEG_GPU_SIZE="16MiB")
    assert rc == 0 and said["pinning"] == "8MiB 16MiB (SSEG_GPU_PIN_SIZES)"
    assert said["segments"] == "16MiB (SSEG_GPU_SIZE)" and said["populate"] == "8GiB 32GiB"
    # what cannot be read: the smallest rows, saying why, and a failure
    said, rc = sizes_said("many", "lots")
    assert rc == 1 and said["host"] == "? cores, MemAvailable ?" and said["largest"] == "128MiB"
    assert said["why"] == ("SSEG_GPU_HOST_CORES=many is not a number of cores; "
                           "SSEG_GPU_HOST_MEMAVAILABLE=lots is not a size such as 128GiB")
    # unset, the rule reads this host
    said, rc = sizes_said()
    assert rc == 0 and said["host"].startswith(f"{len(os.sched_getaffinity(0))} core"), said
