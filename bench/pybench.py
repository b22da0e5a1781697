# SPDX-License-Identifier: Apache-2.0
"""The Python mechanisms, timed through the same phases as the C driver's:
sharedseg's package (create_shared_segment over a torch gloo group) against
what Python users run today: a private torch.empty + fill_ per rank, a
torch tensor's share_memory_() handed over with torch.multiprocessing,
multiprocessing.shared_memory, and Mooncake's own shared segment
(mooncake.shared_segment, where Mooncake is installed: the engines'
environment). Prints one JSON row a line on stdout.

    pybench.py --ranks N --size BYTES --reps R --pages hugetlb-2M,thp,base
               --mechanisms sharedseg-py,private-torch,torch-share-memory,mp-shared-memory,mooncake
               [--section python]
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import hostmem  # noqa: E402  (after the path: the package is found in python/)

TIMEOUT = 600


class Rank:
    """What one rank process holds: its number, the group, the queues."""

    def __init__(self, rank, ranks, size, queues):
        self.rank, self.ranks, self.size, self.queues = rank, ranks, size, queues
        self.group = None


# ---- mechanisms: open(rank, pages, name) -> (buffer, state, create_s, attach_s) ----
# attach_s: a peer's time from the owner's handle sent to the buffer mapped

def open_sharedseg(r, pages, name):
    from sharedseg import create_shared_segment
    seg = create_shared_segment(name, size=r.size, world_size=r.ranks, rank_id=r.rank,
                                comm_group=r.group, pages=pages, populate="owner")
    info = seg.info
    return seg.buffer(), seg, info["create_s"], info["complete_s"]


def close_sharedseg(r, seg):
    seg.close()


def open_private_torch(r, pages, name):
    import torch
    t0 = time.monotonic()
    t = torch.empty(r.size, dtype=torch.uint8)
    t.fill_(0)
    return memoryview(t.numpy()), t, time.monotonic() - t0, 0.0


def open_torch_share(r, pages, name):
    import torch
    t0 = time.monotonic()
    if r.rank == 0:
        t = torch.empty(r.size, dtype=torch.uint8).share_memory_()
        create_s = time.monotonic() - t0
        for peer in range(1, r.ranks):
            r.queues[peer].put((time.monotonic(), t))
        return memoryview(t.numpy()), t, create_s, 0.0
    sent, t = r.queues[r.rank].get(timeout=TIMEOUT)
    return memoryview(t.numpy()), t, 0.0, time.monotonic() - sent


def open_mp_shm(r, pages, name):
    from multiprocessing import resource_tracker, shared_memory

    import numpy
    t0 = time.monotonic()
    if r.rank == 0:
        shm = shared_memory.SharedMemory(create=True, size=r.size)
        numpy.ndarray(r.size, dtype=numpy.uint8, buffer=shm.buf).fill(0)
        create_s = time.monotonic() - t0
        for peer in range(1, r.ranks):
            r.queues[peer].put((time.monotonic(), shm.name))
        return shm.buf, shm, create_s, 0.0
    sent, name = r.queues[r.rank].get(timeout=TIMEOUT)
    shm = shared_memory.SharedMemory(name=name)
    # The owner unlinks; a peer's tracker would unlink it again at exit.
    resource_tracker.unregister(shm._name, "shared_memory")
    return shm.buf, shm, 0.0, time.monotonic() - sent


def close_mp_shm(r, shm):
    shm.close()
    if r.rank == 0:
        shm.unlink()


def open_mooncake(r, pages, name):
    """Mooncake's create_shared_segment, the same call as ours over the same
    group: one block of size bytes. It takes no page kind (POSIX shared
    memory in /dev/shm) and populates nothing, so its owner writes a byte
    a page before it is ready, as sharedseg's populate=owner has done by
    then. attach_s: a peer's whole call (Mooncake says nothing finer)."""
    import numpy
    import torch
    from mooncake.shared_segment import create_shared_segment
    t0 = time.monotonic()
    seg = create_shared_segment(name, {"data": dict(count=1, shape=(r.size,), dtype=torch.uint8)},
                                r.ranks, r.rank, 0, None, r.group)
    view = seg.tensors("data")[0]
    buf = memoryview(view.numpy())
    if r.rank == 0:
        numpy.frombuffer(buf, dtype=numpy.uint8)[::4096] = 0
        return buf, (seg, view), time.monotonic() - t0, 0.0
    return buf, (seg, view), 0.0, time.monotonic() - t0


MECHANISMS = {
    # name: (open, close, shared, takes a page kind)
    "sharedseg-py": (open_sharedseg, close_sharedseg, True, True),
    "private-torch": (open_private_torch, None, False, False),
    "torch-share-memory": (open_torch_share, None, True, False),
    "mp-shared-memory": (open_mp_shm, close_mp_shm, True, False),
    "mooncake": (open_mooncake, None, True, False),
}


# ---- the rank side ----

def first_read(buf):
    """Seconds to sum the buffer as 64-bit words (numpy, one thread)."""
    import numpy
    words = numpy.frombuffer(buf, dtype=numpy.int64)
    t0 = time.monotonic()
    words.sum()
    return time.monotonic() - t0


def touch(buf):
    import numpy
    numpy.frombuffer(buf, dtype=numpy.uint8)[::4096].sum()


def one_rep(r, mech, pages, name, barrier):
    """The phases of one repetition; every rank takes every barrier."""
    opener, closer, _, _ = MECHANISMS[mech]
    rep = dict(ok=True, error="", pages="unverified", huge_fraction=0.0, page_tables=0)
    buf = state = None
    reader = 1 if r.ranks > 1 else 0
    barrier.wait(TIMEOUT)  # the parent samples "before"
    barrier.wait(TIMEOUT)
    try:
        rep["page_tables"] = -hostmem.own_page_tables()
        rep["t_start"] = time.monotonic()
        buf, state, rep["create_s"], rep["attach_s"] = opener(r, pages, name)
        rep["t_ready"] = time.monotonic()
    except Exception as e:  # every rank still takes every barrier
        rep.update(ok=False, error=f"{type(e).__name__}: {e}")
    barrier.wait(TIMEOUT)  # the parent samples "ready"
    barrier.wait(TIMEOUT)
    if rep["ok"] and r.rank == reader:
        rep["read_s"] = first_read(buf)
        rep["smaps_s"], rep["vmas"] = hostmem.smaps_read_cost()
    barrier.wait(TIMEOUT)
    if rep["ok"]:
        if r.rank != reader:
            touch(buf)
        rep["pages"], rep["huge_fraction"] = hostmem.pages_obtained(buf)
        rep["page_tables"] += hostmem.own_page_tables()
    barrier.wait(TIMEOUT)  # the parent samples "held"
    barrier.wait(TIMEOUT)
    del buf
    if closer is not None and state is not None:
        closer(r, state)
    del state
    return rep


def fixed_mmap_threshold():
    """glibc raises its mmap threshold when a large block is freed, so a
    rank's next torch.empty would reuse heap memory it never gave back and
    the host would not see the allocation: fixed, every large block is an
    mmap of its own, as on a fresh process."""
    import ctypes
    M_MMAP_THRESHOLD = -3
    try:
        ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, 1 << 20)
    except OSError:
        pass


def die_with_parent():
    """A rank never outlives the parent that measures it (PR_SET_PDEATHSIG)."""
    import ctypes
    import signal
    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL("libc.so.6").prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def rank_main(rank, ranks, size, cases, queues, barrier, results, store):
    import torch.distributed as dist
    die_with_parent()
    fixed_mmap_threshold()
    r = Rank(rank, ranks, size, queues)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=ranks)
    r.group = dist.group.WORLD
    try:
        for i, (mech, pages, rep) in enumerate(cases):
            results.put((rank, i, one_rep(r, mech, pages, f"pybench-{os.getppid()}-{i}",
                                          barrier)))
    except BaseException:
        barrier.abort()  # the others stop waiting for this rank now
        raise
    dist.destroy_process_group()


def watch(procs, barrier, stop):
    """Breaks the barrier when a rank dies without a word (a signal), or
    when every rank has left while the parent still waits."""
    while not stop.wait(0.5):
        codes = [p.exitcode for p in procs]
        if any(c not in (None, 0) for c in codes) or None not in codes:
            barrier.abort()
            return


# ---- the parent side ----

def reap(procs, stop):
    """Stops the watcher, then the ranks: joined, or killed after 30 s."""
    stop.set()
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()


# Which of a repetition's seven barriers the parent samples host memory at.
SAMPLED = (True, False, True, False, False, True, False)


def parent_rep(barrier, sampled=SAMPLED, timeout=TIMEOUT):
    samples = []
    for sample in sampled:
        barrier.wait(timeout)
        if sample:
            samples.append(hostmem.read())
    return samples


def stats_row(bench, mech, args, pages_req, pages_got, unit, values, **extra):
    row = dict(schema=1, bench=bench, mechanism=mech, ranks=args.ranks, size=args.size,
               pages_requested=pages_req, pages_obtained=pages_got, unit=unit,
               min=min(values), median=statistics.median(values), max=max(values),
               reps=len(values))
    row.update(extra)
    return row


def least_kind(labels):
    order = ["base", "mixed", "thp", "hugetlb-2M", "hugetlb-1G"]
    known = [k for k in labels if k in order]
    return min(known, key=order.index) if known else "unverified"


def rows_of(args, mech, pages, reps):
    """reps: [(reports by rank, [before, ready, held])]"""
    shared = MECHANISMS[mech][2]
    reader = 1 if args.ranks > 1 else 0
    got = least_kind([rep["pages"] for reports, _ in reps for rep in reports])
    req = pages if MECHANISMS[mech][3] else "default"
    s = {k: [] for k in ("ready", "create", "attach", "read", "factor", "tables", "populated")}
    for reports, (before, ready, held) in reps:
        s["ready"].append(max(x["t_ready"] for x in reports) - min(x["t_start"] for x in reports))
        s["create"].append(reports[0]["create_s"])
        s["attach"].append(reports[reader]["attach_s"] * 1e3)
        s["read"].append(args.size / reports[reader]["read_s"] / 1e9)
        s["factor"].append((hostmem.total(held) - hostmem.total(before)) / args.size)
        s["tables"].append(sum(x["page_tables"] for x in reports))
        s["populated"].append((hostmem.total(ready) - hostmem.total(before)) /
                              (args.size * (1 if shared else args.ranks)))
    common = dict(pages_owner=reps[-1][0][0]["pages"], section=args.section)
    populated = statistics.median(s["populated"])
    out = [stats_row("ready", mech, args, req, got, "s", s["ready"],
                     populated_fraction=populated, **common),
           stats_row("owner_create", mech, args, req, got, "s", s["create"], **common),
           stats_row("first_read", mech, args, req, got, "GB/s", s["read"],
                     role="peer" if args.ranks > 1 else "owner", **common),
           stats_row("memory_factor", mech, args, req, got, "factor", s["factor"],
                     populated_fraction=populated, **common),
           stats_row("page_tables", mech, args, req, got, "bytes", s["tables"],
                     fraction_of_size=statistics.median(s["tables"]) / args.size, **common)]
    if shared and args.ranks > 1:
        last = reps[-1][0][reader]
        out.append(stats_row("peer_attach", mech, args, req, got, "ms", s["attach"],
                             smaps_read_ms=last["smaps_s"] * 1e3, vmas=last["vmas"], **common))
    return out


def plan(args):
    """(mechanism, pages, repetition index; -1 for the warm-up) in run order"""
    cases = []
    for mech in args.mechanisms.split(","):
        if mech not in MECHANISMS:
            sys.exit(f"pybench: unknown mechanism {mech}; one of {', '.join(MECHANISMS)}")
        kinds = args.pages.split(",") if MECHANISMS[mech][3] else ["default"]
        for pages in kinds:
            cases += [(mech, pages, -1 - w) for w in range(args.warmup)]
            cases += [(mech, pages, i) for i in range(args.reps)]
    return cases


def run(args):
    import torch.multiprocessing as tmp
    ctx = tmp.get_context("fork")
    cases = plan(args)
    barrier = ctx.Barrier(args.ranks + 1)
    queues = [ctx.Queue() for _ in range(args.ranks)]
    results = ctx.Queue()
    store = tempfile.NamedTemporaryFile(prefix="pybench-store-", delete=False).name
    os.unlink(store)
    procs = [ctx.Process(target=rank_main, args=(r, args.ranks, args.size, cases, queues,
                                                 barrier, results, store), daemon=True)
             for r in range(args.ranks)]
    for p in procs:
        p.start()
    stop = threading.Event()
    threading.Thread(target=watch, args=(procs, barrier, stop), daemon=True).start()
    collected, failed = {}, []
    try:
        for i, (mech, pages, rep) in enumerate(cases):
            samples = parent_rep(barrier)
            reports = sorted((results.get(timeout=TIMEOUT) for _ in range(args.ranks)),
                             key=lambda x: x[0])
            bad = [f"rank {rank}: {rp['error']}" for rank, _, rp in reports if not rp["ok"]]
            if bad:
                failed.append(f"{mech} pages={pages}: {'; '.join(bad)}")
            elif rep >= 0:
                collected.setdefault((mech, pages), []).append(([rp for _, _, rp in reports],
                                                                samples))
    except BaseException:
        barrier.abort()
        raise
    finally:
        reap(procs, stop)
        if os.path.exists(store):
            os.unlink(store)
    for (mech, pages), reps in collected.items():
        for row in rows_of(args, mech, pages, reps):
            print(json.dumps(row), flush=True)
    for f in failed:
        print(f"pybench: {f}", file=sys.stderr)
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--size", type=int, default=64 << 20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--pages", default="base")
    ap.add_argument("--mechanisms", default=",".join(m for m in MECHANISMS if m != "mooncake"))
    ap.add_argument("--section", default="python", help="the section its rows belong to")
    args = ap.parse_args()
    if importlib.util.find_spec("torch") is None:
        print("pybench: the Python mechanisms need torch (python3-torch)", file=sys.stderr)
        return 2
    mechs = args.mechanisms.split(",")
    if "mooncake" in mechs and importlib.util.find_spec("mooncake") is None:
        print(f"pybench: mooncake is not installed for {sys.executable} (make deps installs "
              f"Mooncake in the engines' environment): its rows are left out", file=sys.stderr)
        mechs.remove("mooncake")
        if not mechs:
            return 0
        args.mechanisms = ",".join(mechs)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
