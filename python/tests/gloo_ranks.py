"""What each rank of the 4-rank gloo job does (torch.multiprocessing spawns
this module's functions). Every scenario records what it saw in a JSON file
per rank; test_gloo.py asserts on them."""
import datetime
import gc
import json
import os
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from sharedseg import SharedSegmentError, create_shared_segment


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
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=60))
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
    """The issue's call, unchanged but for the names it assumes."""
    num_layers, tp_size, tp_rank, tp_group = 3, world, rank, group
    k_shape, v_shape = (16, 512), (16, 64)
    from sharedseg import create_shared_segment
    seg = create_shared_segment(
        "vllm_sparse_kv",
        blocks={
            "k": dict(count=num_layers, shape=k_shape, dtype=torch.bfloat16),
            "v": dict(count=num_layers, shape=v_shape, dtype=torch.bfloat16),
        },
        world_size=tp_size,
        rank_id=tp_rank,
        tp_group=tp_group,
    )
    k_caches_cpu = seg.tensors("k")   # list of num_layers zero-copy CPU tensors
    if rank == 0:
        for layer, t in enumerate(k_caches_cpu):
            t.fill_(layer + 0.5)
    dist.barrier(group)
    ok = len(k_caches_cpu) == num_layers and all(
        t.shape == k_shape and t.dtype == torch.bfloat16 and bool(t.eq(i + 0.5).all())
        for i, t in enumerate(k_caches_cpu))
    dist.barrier(group)
    del k_caches_cpu
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


SCENARIOS = [share, exact_call, comm_group, mismatch, grouped, readonly]


def scenarios(rank, world, port, outdir):
    group = init_gloo(rank, world, port)
    results = {}
    for fn in SCENARIOS:
        try:
            results[fn.__name__] = dict(ok=True, data=fn(rank, world, group))
        except Exception:
            results[fn.__name__] = dict(ok=False, error=traceback.format_exc())
            dist.barrier(group)
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.barrier(group)
    dist.destroy_process_group()
