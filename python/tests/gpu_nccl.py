# SPDX-License-Identifier: Apache-2.0
"""The Python package on NCCL groups, for a machine with GPUs (run by
tests/gpu/run.sh; results as JSON lines, one per check, appended to
$OUT/gpu.jsonl):

    python3 python/tests/gpu_nccl.py [--backend nccl] [--out FILE]

Two ranks, one GPU each (or both on GPU 0). Checks:
- store_share: a registered NCCL group: the exchange goes through its
  Store (no NCCL collective); the ranks share; the group all-reduces after.
- store_timeout: the owner stalls past the timeout: the peer fails naming
  it, the owner fails when it arrives, and the NCCL group still all-reduces.
- collective_share: a raw ProcessGroupNCCL backend (no store torch can
  give): the all-gather runs on CUDA tensors, polled; the ranks share.
- collective_timeout: rank 1 stalls: rank 0's all-gather times out without
  Work.wait(timeout) (which aborts the communicator on torch >= 2.1); it
  stays posted and completes when rank 1 arrives: the communicator lives.
- host_register_copy: a registered segment's view copied to the GPU with
  non_blocking=True, then the last view dropped at once: the device is
  synchronised before the pages go; the GPU holds the bytes.
- offload_region: sharedseg.vllm's region without vLLM (which cannot be
  installed on the GPU machine): the segment sharedseg._offload makes for
  it, pinned each way the adapter offers (pin host_register, pin vmm), with
  a view as vLLM's SharedOffloadRegion.create_next_worker_view makes it;
  rank 0 stores a chunk, every rank copies it to its GPU and back into a
  chunk of its own (non_blocking, both ways), and every rank sees both
  copies. On gloo: pin none, the copies to CPU tensors.

`--backend gloo` runs the same checks on CPU tensors (less the last): the
CPU test suite runs it (test_gpu_script.py) so the script's logic is
tested where no GPU is.
"""
import argparse
import contextlib
import datetime
import json
import os
import socket
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]  # the in-place package, the test helpers


def _out_path(argv):
    """--out, read before torch is imported (a machine may lack it)."""
    if "--out" in argv[:-1]:
        return argv[argv.index("--out") + 1]
    return os.path.join(os.environ.get("OUT", "."), "gpu.jsonl")


try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as e:  # say so in the results, not only on stderr
    if __name__ == "__main__":
        with open(_out_path(sys.argv), "a") as f:
            f.write(json.dumps(dict(schema=1, check="python_nccl", ok=False,
                                    error=f"torch is not installed here: {e}")) + "\n")
        print(f"python_nccl: FAILED (torch is not installed here: {e})")
        sys.exit(1)
    raise

import sharedseg  # noqa: E402
from sharedseg import SharedSegmentError, _backends, _frameworks, _offload, create_shared_segment  # noqa: E402
from gloo_ranks import stalled_create  # noqa: E402

WORLD = 2
BLOCKS = {"kv": dict(count=4, shape=(256, 576), dtype="bfloat16")}


def device_of(backend, rank):
    if backend != "nccl":
        return torch.device("cpu")
    return torch.device("cuda", rank % torch.cuda.device_count())


def all_reduce_works(group, device):
    t = torch.ones(1, device=device)
    dist.all_reduce(t, group=group)
    return float(t.item()) == WORLD


def shares(name, group, rank):
    """Each rank writes its entry; every rank reads every entry."""
    with create_shared_segment(name, BLOCKS, comm_group=group, pages="base") as seg:
        kv = seg.tensors("kv")
        kv[rank].fill_(rank + 1)
        dist.barrier()
        ok = all(bool(kv[r].eq(r + 1).all()) for r in range(WORLD))
        dist.barrier()
        del kv
    return ok


def store_share(rank, backend, device):
    group = dist.group.WORLD
    ok = shares("gpu-store", group, rank)
    link = type(_frameworks.resolve(group, None, None)).__name__
    return dict(ok=ok and link == "StoreLink" and all_reduce_works(group, device), link=link)


def store_timeout(rank, backend, device):
    group = dist.group.WORLD
    t0 = time.monotonic()
    with stalled_create(rank == 0, 2.5):
        try:
            create_shared_segment("gpu-store-late", BLOCKS, comm_group=group, pages="base",
                                  timeout=1.0)
            return dict(ok=False, why="no timeout")
        except SharedSegmentError as e:
            err, message = e.errno, str(e)
    after = time.monotonic() - t0
    reduced = all_reduce_works(group, device)
    named = ("gave up" in message) if rank == 0 else ("rank 0 did not reach" in message)
    return dict(ok=reduced and named and err == 110, after=round(after, 2), message=message,
                all_reduce_after=reduced)


def raw_group(backend, prefix, rank, timeout_s=None):
    store = dist.PrefixStore(prefix, dist.distributed_c10d._get_default_store())
    if backend == "nccl":
        return dist.ProcessGroupNCCL(store, rank, WORLD)
    if timeout_s is None:
        return dist.ProcessGroupGloo(store, rank, WORLD)
    return dist.ProcessGroupGloo(store, rank, WORLD, datetime.timedelta(seconds=timeout_s))


def collective_share(rank, backend, device):
    raw = raw_group(backend, "gpu-raw/", rank)
    link = _frameworks.resolve(raw, None, None)
    kind = _backends.collective_kind(raw)
    ok = shares("gpu-collective", raw, rank)
    want = "cuda" if backend == "nccl" else "cpu"
    return dict(ok=ok and type(link).__name__ == "CollectiveLink" and kind == want,
                link=type(link).__name__, device=kind)


def collective_timeout(rank, backend, device):
    raw = raw_group(backend, "gpu-late/", rank, timeout_s=3)
    # NCCL creates its communicator in the first collective, blocking until
    # every rank calls it: create it now, so the stall below hits our poll.
    warm = torch.zeros(1, device=device)
    raw.allreduce([warm]).wait()
    pending, message = None, ""
    with stalled_create(rank == 1, 2.5):
        try:
            create_shared_segment("gpu-collective-late", BLOCKS, comm_group=raw, pages="base",
                                  timeout=1.0)
        except SharedSegmentError as e:
            pending, message = getattr(e, "pending", None), str(e)
    dist.barrier()  # rank 1 arrived, and failed in its turn
    deadline = time.monotonic() + 10
    while pending is not None and not pending.is_completed() and time.monotonic() < deadline:
        time.sleep(0.05)
    completed = None if pending is None else bool(pending.is_completed())
    reduced = all_reduce_works(dist.group.WORLD, device)
    ok = "did not complete within 1 s" in message and reduced and (
        rank == 1 or completed is True)
    return dict(ok=ok, pending_completed=completed, message=message, all_reduce_after=reduced)


def host_register_copy(rank, backend, device):
    blocks = {"kv": dict(count=2, shape=(8192, 8192), dtype="float32")}  # 2 x 256 MiB
    seg = create_shared_segment("gpu-hostreg", blocks, comm_group=dist.group.WORLD,
                                pages="base", host_register=True, device_id=device.index)
    kv = seg.tensors("kv")
    if seg.is_owner:
        kv[1].fill_(3.0)
    dist.barrier()
    pinned = bool(kv[1].is_pinned())
    on_gpu = torch.empty(kv[1].shape, device=device)
    on_gpu.copy_(kv[1], non_blocking=True)
    seg.close()
    del kv  # the last view: the device is synchronised before the pages go
    torch.cuda.synchronize(device)
    ok = bool(on_gpu.eq(3.0).all())
    dist.barrier()
    return dict(ok=ok and pinned, pinned=pinned)


def offload_region(rank, backend, device):
    chunks, row, slot = 8, 2 << 20, 1 << 20  # rows of 2 MiB, a 1 MiB slot at the start
    pins = ("host_register", "vmm") if backend == "nccl" else ("none",)
    platform = "cuda" if backend == "nccl" else "cpu"
    seen = {}
    for pin in pins:
        seg = _offload.region_segment(f"gpu-offload-{pin}", dist.group.WORLD, chunks, row,
                                      _offload.segment_args(dict(pages="auto", pin=pin), platform))
        base = torch.frombuffer(seg.buffer(), dtype=torch.int8)
        view = torch.as_strided(base, (chunks, slot), (row, 1), 0)  # vLLM's worker view
        pattern = torch.arange(slot, dtype=torch.int32).remainder(251).to(torch.int8)
        if rank == 0:
            view[3].copy_(pattern)
        dist.barrier()
        on_device = view[3].to(device, non_blocking=True)
        view[4 + rank].copy_(on_device, non_blocking=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dist.barrier()
        info = seg.info
        seen[pin] = dict(pinned=info["pinned"], device_addr=bool(info["device_addr"]),
                         pages=info["pages"], view_is_pinned=bool(view.is_pinned())
                         if device.type == "cuda" else None,
                         copies=[bool(torch.equal(view[4 + r], pattern)) for r in range(WORLD)])
        dist.barrier()
        del base, view, on_device
        seg.close()
    ok = all(all(s["copies"]) for s in seen.values())
    if backend == "nccl":
        ok = ok and all(s["pinned"] and s["device_addr"] for s in seen.values()) and \
            seen["host_register"]["view_is_pinned"]
    return dict(ok=ok, **seen)


CHECKS = [store_share, store_timeout, collective_share, collective_timeout, host_register_copy,
          offload_region]


def rank_main(rank, backend, port, outdir):
    device = device_of(backend, rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=60))
    results = []
    for check in CHECKS:
        if check is host_register_copy and backend != "nccl":
            continue
        t0 = time.monotonic()
        try:
            got = check(rank, backend, device)
        except Exception:
            got = dict(ok=False, error=traceback.format_exc()[-2000:])
            with contextlib.suppress(Exception):
                dist.barrier()
        got.update(check=check.__name__, rank=rank, seconds=round(time.monotonic() - t0, 2))
        results.append(got)
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="nccl", choices=("nccl", "gloo"))
    ap.add_argument("--out", default=_out_path([]))
    a = ap.parse_args()
    env = dict(torch=torch.__version__, sharedseg=sharedseg.__version__,
               cuda=torch.version.cuda, gpus=torch.cuda.device_count() if a.backend == "nccl"
               else 0)
    with tempfile.TemporaryDirectory() as outdir:
        try:
            mp.spawn(rank_main, args=(a.backend, free_port(), outdir), nprocs=WORLD)
            per_rank = [json.load(open(os.path.join(outdir, f"rank{r}.json")))
                        for r in range(WORLD)]
        except Exception:
            per_rank = None
            failure = traceback.format_exc()[-2000:]
    lines = []
    if per_rank is None:
        lines.append(dict(schema=1, check="python_nccl", ok=False, error=failure, **env))
    else:
        for i, check in enumerate(per_rank[0]):
            ranks = [r[i] for r in per_rank]
            lines.append(dict(schema=1, check=f"python_{a.backend}_{check['check']}",
                              ok=all(r["ok"] for r in ranks), ranks=ranks, **env))
    with open(a.out, "a") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    for line in lines:
        print(f"{line['check']}: {'ok' if line['ok'] else 'FAILED'}")
    return 0 if all(line["ok"] for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
