# SPDX-License-Identifier: Apache-2.0
"""Two gloo ranks over one SharedSegMemoryAllocator arena, LMCache's real
LocalCPUBackend on rank 0 (LMCache's first rank, the one that stores for
MLA models), rank 1 reading rank 0's stored object from the segment with
no broadcast, given its address. Each rank writes what it saw to
OUT/rank<N>.json; test_lmcache.py asserts on them.

    python lmcache_ranks.py SCENARIO 2 PORT OUT    (SCENARIO: share, disagree)
"""
import gc
import os

import torch
import torch.distributed as dist

import engine_ranks

SIZE = 4 << 20
SHAPE = torch.Size([2, 2, 256, 576])  # KV_2LTD: (k/v, layers, tokens, hidden)


def pattern():
    g = torch.Generator().manual_seed(11)
    return torch.randn(SHAPE, generator=g).to(torch.bfloat16)


def share(rank):
    from lmcache.utils import CacheEngineKey
    from lmcache.v1.config import LMCacheEngineConfig
    from lmcache.v1.memory_management import MemoryFormat
    from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend

    import sharedseg
    from sharedseg.lmcache import SharedSegMemoryAllocator

    # A name of this run's own: copies of the test may run at once.
    allocator = SharedSegMemoryAllocator(SIZE, dist.group.WORLD, pages="base",
                                         name=f"lmcache-{os.getppid()}")
    name = allocator.segment.name
    seen = dict(allocates=allocator.allocates, name=name)
    where = [None]
    if rank == 0:
        config = LMCacheEngineConfig.from_defaults(chunk_size=256, local_cpu=True,
                                                   max_local_cpu_size=SIZE / 2**30)
        backend = LocalCPUBackend(config, None, dst_device="cpu", memory_allocator=allocator)
        key = CacheEngineKey("tiny-mla", 2, 0, 1234, torch.bfloat16)
        obj = backend.allocate(SHAPE, torch.bfloat16, MemoryFormat.KV_2LTD)
        obj.tensor.copy_(pattern())
        backend.submit_put_task(key, obj)
        seen["contains"] = backend.contains(key)
        got = backend.get_blocking(key)
        seen["get_equal"] = bool(torch.equal(got.tensor.view(torch.int16),
                                             pattern().view(torch.int16)))
        lo = allocator.segment.base_addr()
        seen["in_segment"] = lo <= obj.tensor.data_ptr() < lo + SIZE
        # What LMCache has no seam for: telling the passive ranks where the
        # object is. Here it goes over the group.
        where = [(obj.metadata.address, obj.get_size())]
        got.ref_count_down()
        obj.ref_count_down()
    dist.broadcast_object_list(where, src=0)
    address, nbytes = where[0]
    if rank != 0:
        try:
            allocator.allocate(SHAPE, torch.bfloat16)
            seen["allocate_refused"] = None
        except RuntimeError as e:
            seen["allocate_refused"] = str(e)
        view = allocator.read_at(address, nbytes)
        seen["read_equal"] = bool(torch.equal(view.view(torch.bfloat16).view(SHAPE).view(torch.int16),
                                              pattern().view(torch.int16)))
        del view
    listed = [s for s in sharedseg.list_segments() if s["name"] == name]
    seen["listed"] = [dict(world_size=s["world_size"], processes=len(s["processes"]),
                           size=s["size"]) for s in listed]
    dist.barrier()
    if rank == 0:
        backend.close()
        del backend, got, obj
    else:
        allocator.close()
    del allocator
    gc.collect()
    dist.barrier()
    seen["left"] = [s["name"] for s in sharedseg.list_segments() if s["name"] == name]
    return seen


def disagree(rank):
    import sharedseg
    from sharedseg.lmcache import SharedSegMemoryAllocator
    try:
        SharedSegMemoryAllocator(SIZE * (rank + 1), dist.group.WORLD, pages="base",
                                 name=f"lmcache-{os.getppid()}")
        return dict(error=None)
    except Exception as e:
        return dict(error=f"{type(e).__name__}: {e}",
                    is_sharedseg=isinstance(e, sharedseg.SharedSegmentError))


def rank_main(rank, scenario, world, port):
    assert world == 2, "lmcache_ranks.py runs 2 ranks"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    return share(rank) if scenario == "share" else disagree(rank)


if __name__ == "__main__":
    engine_ranks.main(rank_main)
