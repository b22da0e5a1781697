# SPDX-License-Identifier: Apache-2.0
"""vLLM's host KV region against sharedseg's, side by side on the same
work: vLLM's own SharedOffloadRegion (a file in /dev/shm that every rank
maps) built as its CPUOffloadingSpec builds it for an MLA model at TP > 1
(the replicated layout: every rank passes rank=0, one copy), by each recipe
vLLM offers (VLLM_RECIPES: 0.32's default, where every rank populates the
whole region; its populate_only_on_creator, where the creator alone does;
0.33's, 32 shm files under one mapping with each rank pre-faulting its
shard, from 0.33's own region file: make vllm033-region), and sharedseg.vllm.SharedSegRegion over the same
ranks' gloo group. Every rank reads a byte of every 4 KiB page after its
region is ready, so the headline "ready" counts every rank's page tables on
both sides: vLLM's default ranks build theirs while populating, ours and
the creator recipe's peers on that first pass. Runs on the interpreter
that has vLLM (the PyPI leg's virtual environment); prints one JSON row a
line on stdout, and the rows side by side on stderr (each figure with the
page kind it was measured on); exits 2 where vLLM cannot be imported.

    vllmbench.py --ranks 2,4,8 --sizes 1073741824,4294967296
                 --pages hugetlb-2M,thp,base [--reps 3 --warmup 1]
    vllmbench.py --devshm 64m --ranks 2 --sizes 268435456
        (both regions in a private mount namespace whose /dev/shm is a
        tmpfs of that size: what a container's default /dev/shm does)
"""
import argparse
import datetime
import glob
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import hostmem  # noqa: E402
from pybench import die_with_parent, least_kind, parent_rep, reap, watch  # noqa: E402

TIMEOUT = 300
# One chunk of an MLA model's KV: DeepSeek-V3's 61 layers x 576 bf16 latent
# values x 64 tokens, a multiple of 4 KiB as vLLM requires.
ROW = 61 * 576 * 2 * 64
OURS, VLLMS = "sharedseg.vllm", "vllm-shared-offload-region"
VLLMS_CREATOR = "vllm-shared-offload-region-populate-only-on-creator"
VLLMS_033 = "vllm-0.33-region-32-files-populate-shard"
NAME = f"sseg-bench-{os.getpid()}"


def venv_python():
    """The interpreter of the PyPI leg's virtual environment (make deps
    installs vLLM there), found as python/python.mk finds it; None where it
    is missing."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    venv = os.environ.get("SHAREDSEG_PYPI_VENV") or os.path.join(cache, "sharedseg", "venv-pypi")
    python = os.path.join(venv, "bin", "python")
    return python if os.access(python, os.X_OK) else None


# ---- the rank side ----

def open_vllms(group, size, pages, name, **recipe):
    import torch.distributed as dist
    from vllm.v1.kv_offload.cpu.shared_offload_region import SharedOffloadRegion
    return SharedOffloadRegion(engine_id=name, num_chunks=size // ROW, rank=0,
                               kv_bytes_per_chunk=ROW, cpu_page_size=ROW,
                               barrier=lambda: dist.barrier(group=group), **recipe)


def open_vllms_creator(group, size, pages, name):
    return open_vllms(group, size, pages, name, populate_only_on_creator=True)


def vllm033_region():
    """vLLM 0.33's shared_offload_region.py, where `make vllm033-region`
    fetched it (from PyPI's vllm 0.33.0 wheel, which CUDA-less hosts cannot
    install), or $SHAREDSEG_VLLM033_REGION; None where it is not there."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.environ.get("SHAREDSEG_VLLM033_REGION") or os.path.join(
        cache, "sharedseg", "vllm-0.33.0", "shared_offload_region.py")
    return path if os.path.exists(path) else None


def open_vllms_033(group, size, pages, name):
    """0.33's region as 0.33's CPUOffloadingSpec builds it for the
    replicated layout: 32 shm files under one mapping (fewer below 32 GiB:
    one per GiB), each rank pre-faulting its shard. Its module is loaded
    from its file, over the installed vLLM's (0.32's) modules it imports."""
    import importlib.util

    import torch.distributed as dist
    spec = importlib.util.spec_from_file_location("vllm033_shared_offload_region",
                                                  vllm033_region())
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SharedOffloadRegion(
        engine_id=name, num_chunks=size // ROW, rank=0, kv_bytes_per_chunk=ROW,
        cpu_page_size=ROW, barrier=lambda: dist.barrier(group=group), num_segments=32,
        populate_shard=(dist.get_rank(group), dist.get_world_size(group)))


# vLLM's recipes for its region: (mechanism, opener, what it needs: the
# SharedOffloadRegion argument of the installed vLLM, or "0.33" for 0.33's
# region file; None: nothing). The plan runs those that are there, and says
# which it left out. vLLM 0.33 splits its region into num_segments files and
# has each rank populate its shard (populate_shard), since page-cache inserts
# serialise per shm file.
VLLM_RECIPES = [
    (VLLMS, open_vllms, None),
    (VLLMS_CREATOR, open_vllms_creator, "populate_only_on_creator"),
    (VLLMS_033, open_vllms_033, "0.33"),
]


def vllm_recipes():
    """The recipes the installed vLLM offers, and a sentence for each it lacks."""
    import inspect

    from vllm.v1.kv_offload.cpu.shared_offload_region import SharedOffloadRegion
    params = inspect.signature(SharedOffloadRegion.__init__).parameters
    offered, missing = [], []
    for mech, _, needs in VLLM_RECIPES:
        if needs == "0.33":
            if vllm033_region():
                offered.append(mech)
            else:
                missing.append(f"{mech} left out: vLLM 0.33's region is not fetched "
                               f"(make vllm033-region)")
        elif needs is None or needs in params:
            offered.append(mech)
        else:
            missing.append(f"{mech} left out: this vLLM's SharedOffloadRegion has no {needs}")
    return offered, missing


def open_ours(group, size, pages, name):
    from sharedseg.engines.base import SegmentRequest
    from sharedseg.vllm import SharedSegRegion
    request = SegmentRequest(pages=pages, pin="none", populate="owner").on("cpu")
    return SharedSegRegion(name=name, group=group, num_chunks=size // ROW, row_stride=ROW,
                           slot=0, slot_bytes=ROW, request=request)


def buffer_of(region):
    return region.segment.buffer() if hasattr(region, "segment") else memoryview(region.mmap_obj)


def facts_of(region):
    """What sharedseg says of its region; read after ready, since its info
    verifies THP through smaps (tens of ms in a process that imported vLLM)."""
    if not hasattr(region, "segment"):
        return {}
    info = region.segment.info
    return dict(pages_reported=info["pages"], create_s=info["create_s"],
                complete_s=info["complete_s"])


OPEN = {OURS: open_ours, **{mech: opener for mech, opener, _ in VLLM_RECIPES}}


def touch_s(buf):
    """Seconds to read one byte of every 4 KiB page: the page tables a rank
    that did not populate makes on its first pass (a rank that did finds
    them made)."""
    import numpy
    t0 = time.monotonic()
    numpy.frombuffer(buf, dtype=numpy.uint8)[::4096].sum()
    return time.monotonic() - t0


def one_rep(rank, ranks, group, item, barrier):
    """The phases of one region; every rank takes every barrier, a failed
    one too."""
    mech, size, pages, _, i = item
    rep = dict(ok=True, error="")
    region = None
    barrier.wait(TIMEOUT)  # the parent samples "before"
    barrier.wait(TIMEOUT)
    tables = hostmem.own_page_tables()
    rep["t_start"] = time.monotonic()
    try:
        region = OPEN[mech](group, size, pages, f"{NAME}-{i}")
        rep["t_ready"] = time.monotonic()
    except Exception as e:
        rep["t_ready"] = time.monotonic()
        rep.update(ok=False, error=f"{type(e).__name__}: {e}")
    rep["page_tables_ready"] = hostmem.own_page_tables() - tables
    barrier.wait(TIMEOUT)  # the parent samples "ready"
    barrier.wait(TIMEOUT)
    if rep["ok"]:  # every rank at once: the page tables it had not made yet
        rep["touch_s"] = touch_s(buffer_of(region))
    rep["page_tables"] = hostmem.own_page_tables() - tables
    barrier.wait(TIMEOUT)
    if rep["ok"]:
        rep.update(facts_of(region))
        if rank == 0:
            rep["pages"], rep["huge_fraction"] = hostmem.pages_obtained(buffer_of(region))
            rep["smaps_s"], rep["vmas"] = hostmem.smaps_read_cost()
    barrier.wait(TIMEOUT)
    if region is not None:
        try:
            region.cleanup()
        except Exception as e:
            rep.update(ok=False, error=f"cleanup: {type(e).__name__}: {e}")
    del region
    barrier.wait(TIMEOUT)
    return rep


def rank_main(rank, ranks, plan, barrier, results, store):
    import torch.distributed as dist
    die_with_parent()
    try:
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                                world_size=ranks, timeout=datetime.timedelta(seconds=TIMEOUT))
        for item in plan:
            results.put((rank, one_rep(rank, ranks, dist.group.WORLD, item, barrier)))
        dist.destroy_process_group()
    except BaseException:
        barrier.abort()  # the others stop waiting for this rank now
        raise


# ---- the parent side ----

# The parent samples host memory before and after the regions are made.
SAMPLED = (True, False, True, False, False, False, False)


def plan_of(args):
    """(mechanism, size, pages, repetition, index) in run order: ours on
    each page kind and vLLM's in turn, the order rotating every repetition
    so that none always follows the same; warm-ups have a negative
    repetition number."""
    regions = [(OURS, k) for k in args.pages.split(",")] + [(m, "default") for m in args.recipes]
    plan = []
    for size in args.sizes:
        for rep in range(-args.warmup, args.reps):
            turn = rep % len(regions)
            for mech, pages in regions[turn:] + regions[:turn]:
                plan.append((mech, size, pages, rep, len(plan)))
    return plan


def run_group(ranks, args):
    """{(mechanism, size, pages): [(reports by rank, [before, ready])]} and
    the failures, for one group size."""
    import torch.multiprocessing as tmp
    ctx = tmp.get_context("fork")
    plan = plan_of(args)
    barrier = ctx.Barrier(ranks + 1)
    results = ctx.Queue()
    with tempfile.NamedTemporaryFile(prefix="vllmbench-store-", delete=False) as f:
        store = f.name
    os.unlink(store)
    procs = [ctx.Process(target=rank_main, args=(r, ranks, plan, barrier, results, store),
                         daemon=True) for r in range(ranks)]
    for p in procs:
        p.start()
    stop = threading.Event()
    threading.Thread(target=watch, args=(procs, barrier, stop), daemon=True).start()
    collected, failed = {}, []
    try:
        for mech, size, pages, rep, _ in plan:
            samples = parent_rep(barrier, SAMPLED, TIMEOUT)
            reports = [rp for _, rp in sorted((results.get(timeout=TIMEOUT)
                                               for _ in range(ranks)), key=lambda x: x[0])]
            bad = [f"rank {r}: {rp['error']}" for r, rp in enumerate(reports) if not rp["ok"]]
            if bad and not args.devshm:
                failed.append(f"{mech} {ranks} ranks {size} bytes: {'; '.join(bad)}")
            elif rep >= 0:
                collected.setdefault((mech, size, pages), []).append((reports, samples))
    except (threading.BrokenBarrierError, queue.Empty):
        barrier.abort()
        failed.append(f"{ranks} ranks: a rank stopped answering (exit codes "
                      f"{[p.exitcode for p in procs]}; a negative one is a signal)")
    except BaseException:
        barrier.abort()
        raise
    finally:
        reap(procs, stop)
        for path in [store] + glob.glob(f"/dev/shm/vllm_offload_{NAME}-*"):
            if os.path.exists(path):
                os.unlink(path)
    return collected, failed


def region_bytes(size):
    return size // ROW * ROW


def row(bench, mech, ranks, size, pages_req, pages_got, unit, values, **extra):
    out = dict(schema=1, bench=bench, mechanism=mech, ranks=ranks, size=size,
               pages_requested=pages_req, pages_obtained=pages_got, unit=unit,
               min=min(values), median=statistics.median(values), max=max(values),
               reps=len(values), region_bytes=region_bytes(size), row_bytes=ROW,
               section="vllm")
    out.update(extra)
    return out


def one_copy_memory(m):
    """What the region holds: shmem pages (tmpfs, memfd, THP) and HugeTLB
    pages; never RSS or PSS, which leave HugeTLB out."""
    return m.get("Shmem", 0) + m["HugeTLB"]


def rows_of(mech, ranks, size, pages, reps):
    """ready: every rank's region made and its page tables built (the
    construction, then the slowest rank's first pass, all ranks at once);
    construction: the last rank's return alone; page_tables: every rank's
    after its first pass; peer_touch: rank 1's first pass."""
    got = least_kind([reports[0].get("pages", "unverified") for reports, _ in reps])
    s = {k: [] for k in ("ready", "construction", "first_pass", "factor", "tables", "touch",
                         "owner", "peers")}
    for reports, (before, ready) in reps:
        made = max(r["t_ready"] for r in reports) - min(r["t_start"] for r in reports)
        first_pass = max(r["touch_s"] for r in reports)
        s["construction"].append(made)
        s["first_pass"].append(first_pass)
        s["ready"].append(made + first_pass)
        s["factor"].append((one_copy_memory(ready) - one_copy_memory(before)) /
                           region_bytes(size))
        s["tables"].append(sum(r["page_tables"] for r in reports))
        if ranks > 1:
            s["touch"].append(reports[1]["touch_s"])
        if "create_s" in reports[0]:
            s["owner"].append(reports[0]["create_s"])
            s["peers"].append(max(r["complete_s"] for r in reports))
    last = reps[-1][0][0]
    extra = dict(smaps_read_ms=last["smaps_s"] * 1e3, vmas=last["vmas"])
    if "pages_reported" in last:
        extra["pages_reported"] = last["pages_reported"]
    if s["owner"]:
        extra.update(owner_create_s=statistics.median(s["owner"]),
                     slowest_complete_s=statistics.median(s["peers"]))
    out = [row("ready", mech, ranks, size, pages, got, "s", s["ready"],
               counts="every rank's page tables", **extra),
           row("construction", mech, ranks, size, pages, got, "s", s["construction"], **extra),
           row("first_pass", mech, ranks, size, pages, got, "s", s["first_pass"], **extra),
           row("memory_factor", mech, ranks, size, pages, got, "factor", s["factor"], **extra),
           row("page_tables", mech, ranks, size, pages, got, "bytes", s["tables"],
               fraction_of_size=statistics.median(s["tables"]) / region_bytes(size), **extra)]
    if s["touch"]:
        out.append(row("peer_touch", mech, ranks, size, pages, got, "s", s["touch"], **extra))
    return out


def side_by_side(rows):
    """The rows as a table, a line per region and group: each figure on the
    page kind the region obtained, ready as x of each vLLM recipe's."""
    ready = [r for r in rows if r["bench"] == "ready"]
    if not ready:
        return []

    def median(r, bench):
        got = [x for x in rows if x["bench"] == bench and x["mechanism"] == r["mechanism"] and
               x["ranks"] == r["ranks"] and x["size"] == r["size"] and
               x["pages_requested"] == r["pages_requested"]]
        return got[0]["median"] if got else float("nan")

    recipes = [m for m, _, _ in VLLM_RECIPES if any(r["mechanism"] == m for r in ready)]
    out = ["ready counts every rank's page tables (construction + the slowest rank's first "
           "pass); ms, page tables in KiB; x: ready as a multiple of each vLLM recipe's",
           f"{'ranks':>5} {'size':>10} {'mechanism':52} {'pages':10} {'ready':>8} "
           f"{'constr.':>8} {'1st pass':>8} {'tables':>8} {'factor':>6}  " +
           "  ".join(f"x {m.rsplit('-', 3)[-1] if m != VLLMS else 'default'}" for m in recipes)]
    for r in sorted(ready, key=lambda r: (r["size"], r["ranks"], r["mechanism"] != OURS)):
        theirs = {m: next((x["median"] for x in ready if x["mechanism"] == m and
                           x["ranks"] == r["ranks"] and x["size"] == r["size"]), None)
                  for m in recipes}
        ratios = "  ".join(f"{r['median'] / t:9.2f}x" if t else f"{'':10}"
                           for t in theirs.values())
        out.append(f"{r['ranks']:>5} {r['region_bytes'] / (1 << 20):8.0f}Mi "
                   f"{r['mechanism'] + ('' if r['mechanism'] != OURS else ' ' + r['pages_requested']):52} "
                   f"{r['pages_obtained']:10} {r['median'] * 1e3:8.1f} "
                   f"{median(r, 'construction') * 1e3:8.1f} {median(r, 'first_pass') * 1e3:8.1f} "
                   f"{median(r, 'page_tables') / 1024:8.0f} {median(r, 'memory_factor'):6.2f}  "
                   + ratios)
    return out


def devshm_row(mech, ranks, size, pages, reps, devshm):
    """The outcome in a /dev/shm of devshm bytes, timed to the last rank's
    return (ready or failed)."""
    reports, _ = reps[0]
    t = max(r["t_ready"] for r in reports) - min(r["t_start"] for r in reports)
    errors = sorted({r["error"] for r in reports if not r["ok"]})
    return dict(schema=1, bench="small_devshm", mechanism=mech, ranks=ranks, size=size,
                pages_requested=pages, pages_obtained=reports[0].get("pages", "none"), unit="s",
                min=t, median=t, max=t, reps=1, region_bytes=region_bytes(size),
                row_bytes=ROW, section="vllm", devshm_bytes=devshm,
                outcome="failed" if errors else "ready", errors=errors)


def in_small_devshm(argv, size):
    """argv again, in a private mount namespace whose /dev/shm is a tmpfs of
    size (root, or an unprivileged user namespace)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None, "unshare (util-linux) is not installed"
    userns = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    script = f'mount -t tmpfs -o size={size} tmpfs /dev/shm && exec "$@"'
    return [unshare, "--mount", "--propagation", "private"] + userns + [
        "sh", "-c", script, "sh"] + argv, None


def parse_size(text):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower()
    return int(t[:-1]) * units[t[-1]] if t[-1] in units else int(t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2")
    ap.add_argument("--sizes", default=str(64 << 20))
    ap.add_argument("--pages", default="base", help="sharedseg's page kinds, comma-separated")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--devshm", default="", help="a /dev/shm of this size (64m)")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if args.devshm and not args.inside:
        argv, why = in_small_devshm([sys.executable] + sys.argv + ["--inside"], args.devshm)
        if argv is None:
            print(f"vllmbench: {why}", file=sys.stderr)
            return 2
        return subprocess.run(argv).returncode
    try:
        import sharedseg.vllm  # noqa: F401
        from vllm.v1.kv_offload.cpu.shared_offload_region import SharedOffloadRegion  # noqa
    except Exception as e:
        print(f"vllmbench: vLLM's region or sharedseg.vllm cannot be imported on "
              f"{sys.executable}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    args.recipes, missing = vllm_recipes()
    for line in missing:
        print(f"vllmbench: {line}", file=sys.stderr)
    if args.devshm:
        args.reps, args.warmup, args.pages, args.recipes = 1, 0, "auto", [VLLMS]
    # vLLM's logger writes to stdout; the rows go to the stdout we were given.
    rows_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    failed, rows = [], []
    for ranks in [int(r) for r in args.ranks.split(",")]:
        collected, bad = run_group(ranks, args)
        failed += bad
        for (mech, size, pages), reps in collected.items():
            if args.devshm:
                lines = [devshm_row(mech, ranks, size, pages, reps, parse_size(args.devshm))]
            else:
                lines = rows_of(mech, ranks, size, pages, reps)
            for line in lines:
                rows_out.write(json.dumps(line) + "\n")
            rows_out.flush()
            rows += lines
    for line in side_by_side(rows):
        print(line, file=sys.stderr)
    for f in failed:
        print(f"vllmbench: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
