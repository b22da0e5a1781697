# SPDX-License-Identifier: Apache-2.0
"""What each rank of the 4-rank gloo job does (torch.multiprocessing spawns
this module's functions). Every scenario records what it saw in a JSON file
per rank; test_gloo.py asserts on them."""
import contextlib
import dataclasses
import datetime
import gc
import json
import os
import runpy
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from sharedseg import SharedSegmentError, create_shared_segment
from sharedseg import _frameworks, _native

TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def spawn(fn, world_size, args, timeout):
    """Runs fn(rank, *args) in world_size processes; kills them at timeout."""
    ctx = mp.spawn(fn, args=args, nprocs=world_size, join=False)
    deadline = time.monotonic() + timeout
    while not ctx.join(timeout=max(0.1, deadline - time.monotonic())):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            raise TimeoutError(f"{world_size} ranks did not finish within {timeout} s")


def init_gloo(rank, world_size, port):
    # torch 2.x: the default group with no backend named ("cpu:gloo,cuda:nccl"
    # where CUDA is); torch 1.13 needs one.
    backend = {} if TORCH2 else {"backend": "gloo"}
    dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=60),
                            **backend)
    return dist.new_group(list(range(world_size)), backend="gloo")


def mapped(addr):
    with open("/proc/self/maps") as f:
        return any(line.startswith(f"{addr:x}-") for line in f)


def inside(seg, tensors):
    lo, hi = seg.base_addr(), seg.base_addr() + seg.total_size()
    return all(lo <= t.data_ptr() and t.data_ptr() + t.numel() * t.element_size() <= hi
               for t in tensors)


def share(rank, world, group):
    """Every rank writes its slice; every rank reads every slice."""
    seg = create_shared_segment(
        "py-gloo-share",
        blocks={"k": dict(count=world, shape=(64, 576), dtype=torch.bfloat16),
                "v": dict(count=world, shape=(64,), dtype=torch.float16)},
        world_size=world, rank_id=rank, comm_group=group, pages="base")
    ks, vs = seg.tensors("k"), seg.tensors("v")
    ks[rank].fill_(rank + 1)
    vs[rank].fill_(rank * 10)
    dist.barrier(group)
    seen = [float(ks[r][63, 575]) == r + 1 and bool(ks[r].eq(r + 1).all()) and
            bool(vs[r].eq(r * 10).all()) for r in range(world)]
    zero_copy = inside(seg, ks + vs)
    facts = seg.info
    keep, base = ks[(rank + 1) % world], seg.base_addr()
    dist.barrier(group)
    del ks, vs, seg
    gc.collect()
    alive = mapped(base) and bool(keep.eq((rank + 1) % world + 1).all())
    dist.barrier(group)  # every rank dropped its object, the owner's too
    keep.fill_(0)
    del keep
    gc.collect()
    return dict(seen=seen, zero_copy=zero_copy, alive_after_del=alive,
                unmapped_with_last_view=not mapped(base), owner=facts["owner_rank"],
                is_owner=facts["is_owner"], pages=facts["pages"])


def exact_call(rank, world, group):
    """docs/python.md's call (readme_call.py, the same lines), with the names it assumes."""
    num_layers, k_shape, v_shape = 3, (16, 512), (16, 64)
    names = runpy.run_path(os.path.join(os.path.dirname(__file__), "readme_call.py"),
                           init_globals=dict(num_layers=num_layers, k_shape=k_shape,
                                             v_shape=v_shape, tp_size=world, tp_rank=rank,
                                             tp_group=group, torch=torch))
    seg, k_caches_cpu = names["seg"], names["k_caches_cpu"]
    if rank == 0:
        for layer, t in enumerate(k_caches_cpu):
            t.fill_(layer + 0.5)
    dist.barrier(group)
    ok = len(k_caches_cpu) == num_layers and all(
        t.shape == k_shape and t.dtype == torch.bfloat16 and bool(t.eq(i + 0.5).all())
        for i, t in enumerate(k_caches_cpu))
    dist.barrier(group)
    del k_caches_cpu, names
    seg.close()
    return dict(ok=ok)


def comm_group(rank, world, group):
    got = {}
    for label, kwargs in (("comm_group", dict(comm_group=group)),
                          ("both_same", dict(comm_group=group, tp_group=group)),
                          ("default_group", {})):
        with create_shared_segment(f"py-gloo-{label}", {"x": (world, (32,), "float32")},
                                   world_size=world, rank_id=rank, pages="base",
                                   **kwargs) as seg:
            xs = seg.tensors("x")
            xs[rank].fill_(rank)
            dist.barrier(group)
            got[label] = all(bool(xs[r].eq(r).all()) for r in range(world))
            dist.barrier(group)
            del xs
    return got


def mismatch(rank, world, group):
    """Rank 2 declares another shape: the same bytes transposed (the layout
    differs), then more bytes (the size differs too)."""
    out = {}
    for label, other in (("transposed", (512, 16)), ("larger", (16, 513))):
        shape = other if rank == 2 else (16, 512)
        try:
            create_shared_segment(f"py-gloo-mismatch-{label}",
                                  {"k": dict(count=2, shape=shape, dtype="bfloat16")},
                                  world_size=world, rank_id=rank, comm_group=group,
                                  pages="base")
            out[label] = dict(raised=False)
        except SharedSegmentError as e:
            out[label] = dict(raised=True, message=str(e),
                              failures={str(r): f for r, f in e.failures.items()})
    return out


def grouped(rank, world, group):
    out = {}
    for layout in ("grouped", "interleaved"):
        blocks = {"k": dict(count=5, shape=(7, 9), dtype=torch.float16),
                  "v": dict(count=3, shape=(11,), dtype="bfloat16")}
        with create_shared_segment(f"py-gloo-{layout}", blocks, world_size=world, rank_id=rank,
                                   comm_group=group, layout=layout, pages="base") as seg:
            for i, t in enumerate(seg.tensors("k")):
                if i % world == rank:
                    t.fill_(i)
            for i, t in enumerate(seg.tensors("v")):
                if i % world == rank:
                    t.fill_(-i)
            dist.barrier(group)
            out[layout] = dict(
                offsets=[seg.offsets("k"), seg.offsets("v")],
                ok=all(bool(t.eq(i).all()) for i, t in enumerate(seg.tensors("k"))) and
                all(bool(t.eq(-i).all()) for i, t in enumerate(seg.tensors("v"))))
            dist.barrier(group)
    return out


def readonly(rank, world, group):
    with create_shared_segment("py-gloo-ro", {"x": (2, (128,), "float32")}, world_size=world,
                               rank_id=rank, comm_group=group, readonly_peers=True,
                               pages="base") as seg:
        if seg.is_owner:
            seg.arrays("x")[1][:] = 42
        dist.barrier(group)
        arr = seg.arrays("x")[1]
        got = dict(is_owner=seg.is_owner, readonly=seg.readonly,
                   writeable=bool(arr.flags.writeable), value=float(arr[5]))
        del arr
        dist.barrier(group)
    return got


def link_kind(group):
    return type(_frameworks.resolve(group, None, None)).__name__


@contextlib.contextmanager
def stalled_create(stall, seconds):
    """This rank's create (phase 1) takes seconds longer, as an owner
    populating a large segment does."""
    original = _native.create

    def slow(*args, **kwargs):
        time.sleep(seconds)
        return original(*args, **kwargs)
    if stall:
        _native.create = slow
    try:
        yield
    finally:
        _native.create = original


def attempt(fn):
    """What fn raised, as data, with when it raised."""
    t0 = time.monotonic()
    try:
        fn()
        return dict(raised=False, after=time.monotonic() - t0)
    except Exception as e:
        return dict(raised=True, type=type(e).__name__, message=str(e),
                    errno=getattr(e, "errno", None), value_error=isinstance(e, ValueError),
                    segment_error=isinstance(e, SharedSegmentError),
                    missing=getattr(e, "missing", None), after=time.monotonic() - t0)


def one_segment(name, group, **kwargs):
    kwargs.setdefault("pages", "base")
    with create_shared_segment(name, {"x": (4, (64,), "float32")}, comm_group=group,
                               **kwargs) as seg:
        return seg.world_size, seg.rank


def shared_bytes(name, group, world, rank, **kwargs):
    """Every rank writes its entry, every rank reads all of them."""
    with create_shared_segment(name, {"x": (world, (16,), "int32")}, pages="base",
                               **kwargs) as seg:
        xs = seg.tensors("x")
        xs[rank].fill_(100 + rank)
        dist.barrier(group)
        ok = all(bool(xs[r].eq(100 + r).all()) for r in range(world))
        dist.barrier(group)
        del xs
        return ok, seg.world_size, seg.rank


def defaults_from_group(rank, world, group):
    """world_size and rank_id omitted: the group's."""
    ok, size, me = shared_bytes("py-gloo-defaults", group, world, rank, comm_group=group)
    return dict(ok=ok, world_size=size, rank=me)


class Coordinator:
    """What vLLM's and SGLang's GroupCoordinator expose to us."""

    def __init__(self, ranks, cpu_group, device_group):
        self.ranks = ranks
        self.world_size = len(ranks)
        self.rank_in_group = ranks.index(dist.get_rank())
        self.local_rank = self.rank_in_group
        self.cpu_group = cpu_group
        self.device_group = device_group


def coordinator(rank, world, group):
    ranks = list(range(world))
    # The device group with no backend named: NCCL where CUDA is, gloo here.
    coord = Coordinator(ranks, dist.new_group(ranks, backend="gloo"), dist.new_group(ranks))
    ok, size, me = shared_bytes("py-gloo-coordinator", coord.cpu_group, world, rank,
                                tp_group=coord)
    return dict(ok=ok, world_size=size, rank=me, link=link_kind(coord))


def tp_pairs(rank, world, group):
    """A world of 4 with two TP groups of 2: each pair maps its own segment
    under the same name; the default group (4 ranks) is not a TP group."""
    pairs = [dist.new_group([0, 1], backend="gloo"), dist.new_group([2, 3], backend="gloo")]
    mine = pairs[rank // 2]
    with create_shared_segment("py-gloo-tp", {"x": (1, (16,), "int32")}, comm_group=mine,
                               pages="base") as seg:
        x = seg.tensors("x")[0]
        if seg.is_owner:
            x.fill_(rank + 1)
        dist.barrier(group)
        seen = int(x[0])
        got = dict(world_size=seg.world_size, rank=seg.rank, seen=seen, owner=seg.owner_rank)
        del x
        dist.barrier(group)
    got["world_refused"] = attempt(lambda: create_shared_segment(
        "py-gloo-tp-world", {"x": (1, (16,), "int32")}, world_size=2, pages="base"))
    return got


@dataclasses.dataclass
class StatelessGroup:
    """vLLM's StatelessProcessGroup, as far as we use it: rank, world_size, store."""
    rank: int
    world_size: int
    store: object


def unregistered(rank, world, group):
    """Groups torch.distributed does not know: vLLM's stateless process
    groups (a ProcessGroup over a PrefixStore with a gloo backend, torch 2.x),
    a raw ProcessGroupGloo, a StatelessProcessGroup."""
    store = dist.distributed_c10d._get_default_store()
    out = {}
    raw = dist.ProcessGroupGloo(dist.PrefixStore("raw/", store), rank, world)
    out["raw_gloo"] = dict(zip(("ok", "world_size", "rank"), shared_bytes(
        "py-gloo-raw", group, world, rank, comm_group=raw)), link=link_kind(raw))
    if TORCH2:
        prefix = dist.PrefixStore("stateless/", store)
        pg = dist.ProcessGroup(prefix, rank, world)
        backend = dist.ProcessGroupGloo(prefix, rank, world)
        pg._set_default_backend(dist.ProcessGroup.BackendType.GLOO)
        pg._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, backend)
        out["stateless_pg"] = dict(zip(("ok", "world_size", "rank"), shared_bytes(
            "py-gloo-stateless-pg", group, world, rank, comm_group=pg)), link=link_kind(pg))
    sg = StatelessGroup(rank, world, dist.PrefixStore("spg/", store))
    out["stateless_group"] = dict(zip(("ok", "world_size", "rank"), shared_bytes(
        "py-gloo-spg", group, world, rank, comm_group=sg)), link=link_kind(sg))
    return out


def owner_stalled(rank, world, group):
    """The owner is slower than the timeout: the others give up naming it,
    the owner gives up when it arrives, and the same group then passes a
    barrier and serves the next segment."""
    with stalled_create(rank == 0, 4.0):
        got = attempt(lambda: one_segment("py-gloo-stall", group, timeout=1.5))
    dist.barrier(group)
    got["barrier"] = True
    got["next"] = one_segment("py-gloo-after-stall", group)
    return got


def bad_argument(rank, world, group):
    """One rank's mistake is every rank's ValueError; the group stays in step."""
    got = attempt(lambda: one_segment("py-gloo-bad", group,
                                      **({"pages": "hugepages"} if rank == 2 else {})))
    got2 = attempt(lambda: one_segment("py-gloo-bad-size", group,
                                       **({"world_size": 3} if rank == 1 else {})))
    dist.barrier(group)
    return dict(pages=got, world_size=got2, barrier=True)


def back_in_step(rank, world, group):
    """Rank 1 names two groups: every rank's agreed ValueError. Rank 3 then
    raises before its call reaches the store (a group and an exchange):
    the others time out. After a barrier the next two calls work on every
    rank, rank 3's included."""
    other = dist.new_group(list(range(world)), backend="gloo")
    two = attempt(lambda: one_segment("py-gloo-two-groups", group, timeout=10,
                                      **({"tp_group": other} if rank == 1 else {})))
    missed = attempt(lambda: one_segment(
        "py-gloo-missed", group, timeout=1.5,
        **({"exchange": lambda mine: [mine]} if rank == 3 else {})))
    dist.barrier(group)
    got = dict(two=two, missed=missed,
               next=[shared_bytes(f"py-gloo-in-step-{i}", group, world, rank, comm_group=group,
                                  timeout=10)[0] for i in range(2)])
    dist.barrier(group)
    got["barrier"] = True
    return got


def collective_timeout(rank, world, group):
    """A group torch holds no store for: the all-gather is polled, never
    waited on with a timeout; after the timeout it stays posted and
    completes when the late rank arrives."""
    raw = dist.ProcessGroupGloo(dist.PrefixStore("late/", dist.distributed_c10d._get_default_store()),
                                rank, world, datetime.timedelta(seconds=4))
    pending = None
    with stalled_create(rank == 3, 3.5):
        try:
            one_segment("py-gloo-late", raw, timeout=1.5)
            got = dict(raised=False)
        except SharedSegmentError as e:
            pending = getattr(e, "pending", None)
            got = dict(raised=True, message=str(e), errno=e.errno)
    dist.barrier(group)  # rank 3 arrived and failed in its turn
    deadline = time.monotonic() + 10
    while pending is not None and not pending.is_completed() and time.monotonic() < deadline:
        time.sleep(0.05)
    got["pending_completed"] = None if pending is None else bool(pending.is_completed())
    return got


SCENARIOS = [share, exact_call, comm_group, mismatch, grouped, readonly, defaults_from_group,
             coordinator, tp_pairs, unregistered, owner_stalled, bad_argument,
             back_in_step, collective_timeout]


def scenarios(rank, world, port, outdir):
    group = init_gloo(rank, world, port)
    results = {}
    only = os.environ.get("SSEG_GLOO_SCENARIOS")  # a comma list, when debugging
    for fn in SCENARIOS:
        if only and fn.__name__ not in only.split(","):
            continue
        try:
            results[fn.__name__] = dict(ok=True, data=fn(rank, world, group))
        except Exception:
            results[fn.__name__] = dict(ok=False, error=traceback.format_exc())
            dist.barrier(group)
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.barrier(group)
    dist.destroy_process_group()
