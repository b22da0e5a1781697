# SPDX-License-Identifier: Apache-2.0
"""The Python package on NCCL or gloo groups, for a machine with GPUs (run
by tests/gpu/run.sh; results as JSON lines, one per check, appended to
$OUT/gpu.jsonl):

    python3 python/tests/helpers/gpu_nccl.py [--backend nccl|gloo] [--device cuda|cpu] [--out FILE]

Two ranks, one GPU each. NCCL refuses two ranks on one GPU ("Duplicate GPU
detected"; 2.30+ unless NCCL_MULTI_RANK_GPU_ENABLE=1), so on a machine
with one GPU run.sh runs `--backend gloo --device cuda`: the groups are
gloo's (collectives on CPU tensors), both ranks copy to and from GPU 0.
Checks:
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
- pinned_views: torch over each kind of host memory: a 64 MiB view of a
  segment pinned each way (pin host_register, pin vmm: rank 1's view is the
  VMM handle imported in a second process), torch's own pinned memory and
  pageable memory: what tensor.is_pinned() answers, what the driver says
  the memory is (cuPointerGetAttribute, which torch's is_pinned() reads
  through cudaPointerGetAttributes), and whether a non_blocking copy each
  way is still in flight when copy_() returns (asynchronous) or already
  done (the driver staged it); and what pin auto chose.
- offload_region: sharedseg.vllm's region without vLLM (which cannot be
  installed on the GPU machine): the segment sharedseg.engines.vllm.rows makes for
  it, pinned each way the adapter offers (pin host_register, pin vmm), with
  a view as vLLM's SharedOffloadRegion.create_next_worker_view makes it;
  rank 0 stores a chunk, every rank copies it to its GPU and back into a
  chunk of its own (non_blocking, both ways), and every rank sees both
  copies. On gloo: pin none, the copies to CPU tensors.

`--backend gloo` without a GPU runs the same checks on CPU tensors (less
host_register_copy and pinned_views, and offload_region unpinned): the CPU
test suite runs it through tests/gpu/run.sh (test_gpu_script.py), so the
script's logic is tested where no GPU is.
"""
import ctypes
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
sys.path[:0] = [os.path.dirname(os.path.dirname(HERE)), HERE]  # the package, the helpers


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
from sharedseg import (SharedSegmentError, _backends, _frameworks,  # noqa: E402
                       create_shared_segment)
from sharedseg.engines.base import SegmentRequest, auto_pin  # noqa: E402
from sharedseg.engines.vllm.rows import region_segment  # noqa: E402
from gloo_ranks import stalled_create  # noqa: E402

WORLD = 2
BLOCKS = {"kv": dict(count=4, shape=(256, 576), dtype="bfloat16")}


def device_of(kind, rank):
    """The device of rank's tensors: its own GPU where there are enough."""
    if kind != "cuda":
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


def driver_memory_type(tensor):
    """What the driver says tensor's memory is (CU_POINTER_ATTRIBUTE_MEMORY_TYPE):
    "host", "device", or the error (pageable memory is unknown to it)."""
    cuda = ctypes.CDLL("libcuda.so.1")
    kind = ctypes.c_uint(0)
    rc = cuda.cuPointerGetAttribute(ctypes.byref(kind), 2, ctypes.c_uint64(tensor.data_ptr()))
    return {1: "host", 2: "device"}.get(kind.value, str(kind.value)) if rc == 0 else f"CUresult {rc}"


def in_flight_after(copy):
    """Whether the copy copy() queues is still running when it returns."""
    torch.cuda.synchronize()
    t0 = time.monotonic()
    copy()
    returned = time.monotonic() - t0
    done = torch.cuda.Event()
    done.record()
    running = not done.query()
    torch.cuda.synchronize()
    return running, round(returned * 1e3, 3), round((time.monotonic() - t0) * 1e3, 3)


def view_facts(host, device):
    on_gpu = torch.empty(host.numel(), dtype=host.dtype, device=device)
    h2d = in_flight_after(lambda: on_gpu.copy_(host, non_blocking=True))
    d2h = in_flight_after(lambda: host.copy_(on_gpu, non_blocking=True))
    return dict(is_pinned=bool(host.is_pinned()), driver=driver_memory_type(host),
                h2d_async=h2d[0], h2d_ms=h2d[1:], d2h_async=d2h[0], d2h_ms=d2h[1:])


def pinned_views(rank, backend, device):
    size = 64 << 20  # long enough to be seen in flight (a few ms at 25 GB/s)
    seen = dict(pinned=view_facts(torch.empty(size, dtype=torch.uint8, pin_memory=True), device),
                pageable=view_facts(torch.empty(size, dtype=torch.uint8), device))
    for pin in ("host_register", "vmm"):
        seg = region_segment(f"gpu-views-{pin}", dist.group.WORLD, 1, size,
                             SegmentRequest(pages="auto", pin=pin).on("cuda"))
        view = torch.frombuffer(seg.buffer(), dtype=torch.uint8)[:size]
        seen[pin] = dict(view_facts(view, device), segment_pinned=bool(seg.info["pinned"]),
                         owner=seg.is_owner)
        dist.barrier()
        del view
        seg.close()
    seen["pin_auto"] = auto_pin("cuda")[0]
    # torch's answer is the driver's: a view reads pinned exactly where the
    # driver says host memory; torch's own pinned memory is; pageable is not.
    ok = all(f["is_pinned"] == (f["driver"] == "host") for k, f in seen.items() if k != "pin_auto")
    ok = ok and seen["pinned"]["is_pinned"] and not seen["pageable"]["is_pinned"] and \
        seen["host_register"]["is_pinned"]
    return dict(ok=ok, **seen)


def offload_region(rank, backend, device):
    chunks, row, slot = 8, 2 << 20, 1 << 20  # rows of 2 MiB, a 1 MiB slot at the start
    pins = ("host_register", "vmm") if device.type == "cuda" else ("none",)
    platform = "cuda" if device.type == "cuda" else "cpu"
    seen = {}
    for pin in pins:
        seg = region_segment(f"gpu-offload-{pin}", dist.group.WORLD, chunks, row,
                             SegmentRequest(pages="auto", pin=pin).on(platform))
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
    if device.type == "cuda":
        ok = ok and all(s["pinned"] and s["device_addr"] for s in seen.values()) and \
            seen["host_register"]["view_is_pinned"]
    return dict(ok=ok, **seen)


CHECKS = [store_share, store_timeout, collective_share, collective_timeout, host_register_copy,
          pinned_views, offload_region]
# Checks of copies: on the copy device; the others on the group's.
COPIES = (host_register_copy, pinned_views, offload_region)
CUDA_ONLY = (host_register_copy, pinned_views)


def rank_main(rank, backend, copies_on, port, outdir):
    device = device_of("cuda" if backend == "nccl" else "cpu", rank)
    copy_device = device_of(copies_on, rank)
    if copy_device.type == "cuda":
        torch.cuda.set_device(copy_device)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=60))
    results = []
    for check in CHECKS:
        if check in CUDA_ONLY and copy_device.type != "cuda":
            continue
        t0 = time.monotonic()
        try:
            got = check(rank, backend, copy_device if check in COPIES else device)
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


def view_lines(per_rank):
    """pinned_views flat, one line per rank and kind of memory (run.sh's summary)."""
    flat = []
    for results in per_rank or ():
        for got in results:
            if got["check"] != "pinned_views" or "pinned" not in got:
                continue
            for memory in ("pinned", "pageable", "host_register", "vmm"):
                facts = got[memory]
                flat.append(dict(schema=1, check="torch_view", rank=got["rank"], memory=memory,
                                 is_pinned=facts["is_pinned"], driver=facts["driver"],
                                 h2d_async=facts["h2d_async"], d2h_async=facts["d2h_async"],
                                 pin_auto=got["pin_auto"]))
    return flat


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="nccl", choices=("nccl", "gloo"))
    ap.add_argument("--device", choices=("cuda", "cpu"),
                    help="where the copies go (default: cuda on nccl, cpu on gloo)")
    ap.add_argument("--out", default=_out_path([]))
    a = ap.parse_args()
    copies_on = a.device or ("cuda" if a.backend == "nccl" else "cpu")
    env = dict(torch=torch.__version__, sharedseg=sharedseg.__version__,
               cuda=torch.version.cuda, copies_on=copies_on,
               gpus=torch.cuda.device_count() if copies_on == "cuda" else 0)
    with tempfile.TemporaryDirectory() as outdir:
        try:
            mp.spawn(rank_main, args=(a.backend, copies_on, free_port(), outdir), nprocs=WORLD)
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
    lines += view_lines(per_rank)
    with open(a.out, "a") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    for line in lines:
        if "ok" in line:
            print(f"{line['check']}: {'ok' if line['ok'] else 'FAILED'}")
    return 0 if all(line.get("ok", True) for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
