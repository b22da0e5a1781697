# SPDX-License-Identifier: Apache-2.0
"""The bench's smoke test (ctest bench_smoke): every mechanism at a few MiB,
the rows well-formed, sharedseg's memory factor well below private
buffers', and the report written from the rows. The C mechanisms need
nothing but the driver; the Python ones need torch and the built package
(make python) and are skipped without them; vLLM's region against ours
needs the PyPI leg's virtual environment, which has vLLM (make deps). Any
skip makes the run exit 77, which ctest reports as a skipped test, not a
passed one (make test installs both environments and matplotlib, and builds
the package for both interpreters, first).

    python3 bench/test_bench.py        (or: python3 -m pytest bench/test_bench.py)
    SSEG_BENCH_TOOL=build/sharedseg picks the tool whose driver runs
    (sharedseg bench case ...).
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from rows import one, problems, select  # noqa: E402

TOOL = os.environ.get("SSEG_BENCH_TOOL", os.path.join(os.path.dirname(HERE), "build", "sharedseg"))
# Large enough that what other processes of a busy machine allocate
# meanwhile (a few MiB) cannot hide a copy.
SIZE = 32 << 20
SETUP_BENCHES = {"ready", "owner_create", "first_read", "memory_factor", "page_tables"}
collected = []  # every row the tests saw, for the report test


def skip(why):
    raise unittest.SkipTest(why)


def driver(*args):
    if not os.access(TOOL, os.X_OK):
        skip(f"{TOOL} is not built")
    p = subprocess.run([TOOL, "bench"] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 0, f"sharedseg bench {' '.join(map(str, args))}: exit " \
                              f"{p.returncode}: {p.stderr.strip()}"
    return parse(p.stdout, "sharedseg bench")


def parse(text, who):
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert rows, f"{who} printed no rows"
    for row in rows:
        bad = problems(row)
        assert not bad, f"{who}: a malformed row {row}: {bad}"
    collected.extend(rows)
    return rows


def factor(rows, mechanism):
    got = select(rows, bench="memory_factor", mechanism=mechanism)
    assert len(got) == 1, f"one memory_factor row of {mechanism} expected, got {len(got)}"
    return got[0]["median"]


def test_c_mechanisms():
    rows = []
    for mech, pages in (("sharedseg", "base"), ("private", "base"), ("devshm", "base"),
                        ("procfd", "thp")):
        got = driver("case", "--mechanism", mech, "--ranks", 4, "--size", SIZE, "--pages",
                     pages, "--reps", 3, "--warmup", 1)
        benches = {r["bench"] for r in got}
        assert SETUP_BENCHES <= benches, f"{mech}: missing {SETUP_BENCHES - benches}"
        assert all(r["ranks"] == 4 and r["size"] == SIZE for r in got)
        rows += got
    ours, private = factor(rows, "sharedseg"), factor(rows, "private-malloc")
    # One copy against four: the gap is 3 segments, far above what other
    # processes of a busy machine move meanwhile.
    assert ours < private - 1.5, f"sharedseg's memory factor {ours:.2f} is not well below " \
                                 f"private buffers' {private:.2f}"
    assert 3.0 < private < 6.0, f"four private buffers gave a factor of {private:.2f}"
    seg = select(rows, bench="ready", mechanism="sharedseg")[0]
    assert seg["pages_obtained"] == "base", seg


def test_populate_modes():
    for mode in ("spread", "lazy"):
        got = driver("case", "--mechanism", "sharedseg", "--ranks", 2, "--size", SIZE,
                     "--populate", mode, "--reps", 1, "--warmup", 0, "--touch", "none")
        ready = select(got, bench="ready")[0]
        assert ready["populate"] == mode


def test_background_rows():
    """The background section's cases, and its targets judged from them."""
    import targets
    rows = []
    for mech, mode in (("sharedseg", "background"), ("sharedseg", "owner"),
                       ("sharedseg", "lazy"), ("devshm", None)):
        more = ["--populate", mode, "--threads", 2 if mode == "owner" else 0] if mode else []
        if mode in ("background", "owner"):
            more.append("--read-during")
        got = driver("case", "--mechanism", mech, "--ranks", 2, "--size", SIZE, "--pages",
                     "base", "--reps", 2, "--warmup", 0, "--touch", "none", *more)
        for r in got:
            r["section"] = "background"
        rows += got
    got = driver("alternatives", "--size", SIZE, "--reps", 2)
    assert {(r["bench"], r["mechanism"]) for r in got} == {
        (b, w) for b in ("resident_4k", "first_read_after")
        for w in ("populate_write_1_thread", "populate_write_2_threads", "fallocate")} | {
        ("peer_tables_4k", w)
        for w in ("populate_read", "populate_read_then_read", "first_read_faulting")}
    for r in got:
        r["section"] = "background"
    rows += got
    bg = one(rows, bench="resident", populate="background")
    ready = one(rows, bench="ready", populate="background")
    assert bg["during_read_gbps"] > 0 and bg["median"] >= ready["median"], (bg, ready)
    for judge in (targets.resident_base(rows, 2), targets.background_usable(rows),
                  targets.background_resident(rows, 2), targets.background_reads(rows)):
        assert judge.met is not None, f"{judge.target}: not measured from {len(rows)} rows"


def test_bandwidth_and_limits():
    got = driver("case", "--mechanism", "sharedseg", "--ranks", 2, "--size", SIZE, "--reps", 2,
                 "--bandwidth", "--blocks", "16K,64K")
    for bench in ("seq_read", "seq_copy", "kv_gather"):
        roles = {r["role"] for r in select(got, bench=bench)}
        assert {"peer", "private"} <= roles, f"{bench}: roles {roles}"
    assert {r["block"] for r in select(got, bench="kv_gather")} == {16384, 65536}
    assert {r["role"] for r in select(got, bench="kv_gather")} == {"peer", "owner", "private"}
    got = driver("limits", "--size", SIZE, "--reps", 2)
    assert {r["bench"] for r in got} == {"memset_limit", "memcpy_limit", "read_limit"}


def test_driver_refuses_what_a_mechanism_cannot_do():
    if not os.access(TOOL, os.X_OK):
        skip(f"{TOOL} is not built")
    p = subprocess.run([TOOL, "bench", "case", "--mechanism", "devshm", "--pages", "hugetlb"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "HugeTLB" in p.stderr, (p.returncode, p.stderr)


def test_python_mechanisms():
    package = os.path.join(os.path.dirname(HERE), "python")
    probe = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {package!r}); "
                            "import torch, numpy, sharedseg._native"], capture_output=True)
    if probe.returncode:
        skip("torch, numpy or the built package (make python) is missing")
    p = subprocess.run([sys.executable, os.path.join(HERE, "pybench.py"), "--ranks", "2",
                        "--size", str(2 * SIZE), "--reps", "3", "--pages", "base"],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, f"pybench: exit {p.returncode}: {p.stderr.strip()}"
    rows = parse(p.stdout, "pybench")
    assert {r["mechanism"] for r in rows} == {"sharedseg-py", "private-torch",
                                              "torch-share-memory", "mp-shared-memory"}
    ours, private = factor(rows, "sharedseg-py"), factor(rows, "private-torch")
    assert ours < private - 0.5, f"sharedseg-py's memory factor {ours:.2f}, private " \
                                 f"torch buffers' {private:.2f}"


def test_mooncake_mechanism():
    """Mooncake's own shared segment beside ours, on the engines'
    interpreter, which has Mooncake (make deps): both one copy, each row
    naming the page kind it obtained."""
    import vllmbench as vb
    if vb.venv_python() is None:
        skip("no engines' environment (make deps makes ~/.cache/sharedseg/venv-pypi)")
    p = subprocess.run([vb.venv_python(), os.path.join(HERE, "pybench.py"), "--ranks", "2",
                        "--size", str(2 * SIZE), "--reps", "3", "--pages", "base",
                        "--mechanisms", "sharedseg-py,mooncake", "--section", "mooncake"],
                       capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, MC_TCP_BIND_ADDRESS="127.0.0.1"))
    assert p.returncode == 0, f"pybench: exit {p.returncode}: {p.stderr.strip()[-2000:]}"
    assert "mooncake is not installed" not in p.stderr, p.stderr
    rows = parse(p.stdout, "pybench")
    assert {r["mechanism"] for r in rows} == {"sharedseg-py", "mooncake"}
    assert {r["section"] for r in rows} == {"mooncake"}
    for mech in ("sharedseg-py", "mooncake"):
        assert factor(rows, mech) < 1.5, f"{mech}'s memory factor {factor(rows, mech):.2f}"
    theirs = one(rows, bench="ready", mechanism="mooncake")
    assert theirs["pages_requested"] == "default" and theirs["pages_obtained"] in ("base", "thp")


def vllmbench(*args):
    """vllmbench.py's rows on the interpreter that has vLLM: `make deps`
    installs it (tools/install-deps.sh, the PyPI leg) and `make test` runs
    deps first, so where that environment exists the vLLM rows must run."""
    import vllmbench as vb
    if vb.venv_python() is None:
        skip("no vLLM environment (make deps installs it in ~/.cache/sharedseg/venv-pypi)")
    p = subprocess.run([vb.venv_python(), os.path.join(HERE, "vllmbench.py")]
                       + [str(a) for a in args], capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, f"vllmbench {' '.join(map(str, args))}: exit {p.returncode}: " \
                              f"{p.stderr.strip()[-2000:]}"
    return parse(p.stdout, "vllmbench")


def test_vllm_regions():
    rows = vllmbench("--ranks", 2, "--sizes", 2 * SIZE, "--pages", "base", "--reps", 2,
                     "--warmup", 1)
    # vLLM 0.32's two recipes (every rank populates, or the creator alone)
    # and 0.33's (32 files, each rank its shard: make test fetches its file)
    for mech in ("sharedseg.vllm", "vllm-shared-offload-region",
                 "vllm-shared-offload-region-populate-only-on-creator",
                 "vllm-0.33-region-32-files-populate-shard"):
        benches = {r["bench"] for r in select(rows, mechanism=mech)}
        assert benches == {"ready", "construction", "first_pass", "memory_factor", "page_tables",
                           "peer_touch"}, (mech, benches)
        # one copy each, not one a rank
        assert factor(rows, mech) < 1.5, f"{mech}: memory factor {factor(rows, mech):.2f}"
        ready = select(rows, mechanism=mech, bench="ready")[0]
        assert ready["pages_obtained"] == "base"
        # the headline counts every rank's page tables: the construction,
        # then the slowest rank's first pass over the region
        assert ready["counts"] == "every rank's page tables"
        made = select(rows, mechanism=mech, bench="construction")[0]
        assert ready["min"] >= made["min"] and ready["max"] >= made["max"]
    assert select(rows, mechanism="sharedseg.vllm")[0]["pages_reported"] == "base"


def test_vllm_small_devshm():
    import vllmbench as vb
    probe, why = vb.in_small_devshm(["true"], "1m")
    if probe is None or subprocess.run(probe, capture_output=True).returncode:
        skip(why or "no private mount namespace here (root without CAP_SYS_ADMIN, or no "
                    "unprivileged user namespaces): no /dev/shm of our own to shrink")
    rows = {r["mechanism"]: r for r in vllmbench("--devshm", "64m", "--ranks", 2,
                                                   "--sizes", 256 << 20)}
    assert rows["sharedseg.vllm"]["outcome"] == "ready", rows["sharedseg.vllm"]
    theirs = rows["vllm-shared-offload-region"]
    assert theirs["outcome"] == "failed" and any(
        "Insufficient space in /dev/shm" in e for e in theirs["errors"]), theirs


def fake_pools(root, pools):
    """A copy of /sys/kernel/mm/hugepages: {"hugepages-2048kB": {file: n}}."""
    for pool, files in pools.items():
        os.makedirs(os.path.join(root, pool))
        for name, value in files.items():
            with open(os.path.join(root, pool, name), "w") as f:
                f.write(f"{value}\n")


def test_hugetlb_in_use_counts_surplus_pages_once():
    """5 pages of which 3 surplus, all in use: nr_hugepages says 5 (it
    counts the surplus ones), so 10 MiB, not 16."""
    import hostmem
    with tempfile.TemporaryDirectory() as root:
        fake_pools(root, {"hugepages-2048kB": dict(nr_hugepages=5, surplus_hugepages=3,
                                                   free_hugepages=0, resv_hugepages=0),
                          "hugepages-1048576kB": dict(nr_hugepages=1, surplus_hugepages=0,
                                                      free_hugepages=1, resv_hugepages=0)})
        assert hostmem.hugetlb_in_use(root) == 5 * (2 << 20)


def test_report():
    if importlib.util.find_spec("matplotlib") is None:
        skip("matplotlib is missing (make bench installs it)")
    if not collected:
        skip("no rows: the driver tests did not run")
    import report
    result = dict(schema=1, matrix="smoke", generated="now", duration_s=0,
                  peak_memory_bytes=0, knobs_found={}, rows=collected, skipped=[],
                  failures=[], facts=dict(cpu="?", cores=os.cpu_count(), memory_bytes=1,
                                          mem_available_bytes=1, kernel="?",
                                          virtualization="?", devshm="?", python="?",
                                          root=False, perf_hardware_counters="?",
                                          knobs=dict(shmem_enabled="?", shmem_enabled_2M="",
                                                     thp_enabled="?", thp_defrag="?",
                                                     nr_hugepages="0", hugetlb_free_2M="0")))
    with tempfile.TemporaryDirectory() as docs:
        report.write(result, docs, log=lambda msg: None)
        with open(os.path.join(docs, "benchmarks.md")) as f:
            text = f.read()
    assert "## Targets" in text and "## Host memory" in text
    if select(collected, section="vllm", bench="ready"):
        assert "ours / vLLM's" in text
        assert "Ours against each recipe" in text and "0.33 (32 files" in text
    if select(collected, bench="small_devshm"):
        assert "Insufficient space" in text
    if select(collected, section="mooncake", mechanism="mooncake"):
        section = text.split("## Mooncake's own shared segment", 1)[1].split("\n## ", 1)[0]
        assert "| mooncake |" in section and "| sharedseg-py |" in section, section


def run_tests(namespace):
    """A runner for machines without pytest: each test of a module's
    namespace in order."""
    failed = skipped = 0
    for name, test in [(n, t) for n, t in namespace.items() if n.startswith("test_")]:
        try:
            test()
            print(f"PASS {name}")
        except unittest.SkipTest as e:
            skipped += 1
            print(f"SKIP {name}: {e}")
        except AssertionError as e:
            failed += 1
            print(f"FAIL {name}: {e}")
    # 77: ctest shows the test as skipped rather than passed.
    return 1 if failed else 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
