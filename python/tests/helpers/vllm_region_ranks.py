# SPDX-License-Identifier: Apache-2.0
"""What ranks of a vLLM TP group on gloo do to build SharedSegRegion
together and write through vLLM's own views of it, for
test_vllm_region.py: the scenarios slots and canonical, which
vllm_ranks.py runs in the same ranks as its own."""
import mmap
import os

import torch



PAGE = mmap.PAGESIZE
CHUNKS = 4


def region(group, scenario, slot, slot_bytes, row_stride):
    from sharedseg.engines.base import SegmentRequest
    from sharedseg.vllm import SharedSegRegion
    return SharedSegRegion(name=f"vllm-region-{scenario}-{os.getppid()}", group=group,
                           num_chunks=CHUNKS, row_stride=row_stride, slot=slot,
                           slot_bytes=slot_bytes,
                           request=SegmentRequest(pages="base").on("cpu"))


def listed(name):
    import sharedseg
    return [len(s["processes"]) for s in sharedseg.list_segments() if s["name"] == name]


def slots(rank, world, group):
    """Each rank fills its slot of every chunk row with its own value; each
    then reads every rank's slot in the one mapping. Then every rank but 0
    cleans up: rank 0's mapping keeps every byte; then rank 0 does."""
    r = region(group, "slots", rank, PAGE, world * PAGE)
    name = r.segment.name
    view = r.create_next_worker_view(PAGE)
    view.fill_(11 * (rank + 1))
    group.barrier()
    rows = r.base_tensor.view(CHUNKS, world, PAGE)
    seen = dict(owner=r.segment.is_owner, listed=listed(name),
                offset=view.data_ptr() - r.base_tensor.data_ptr(),
                every_slot=all(bool((rows[:, s] == 11 * (s + 1)).all()) for s in range(world)))
    group.barrier()
    del view, rows
    if rank != 0:
        r.cleanup()
    group.barrier()
    if rank == 0:
        rows = r.base_tensor.view(CHUNKS, world, PAGE)
        seen["kept"] = all(bool((rows[:, s] == 11 * (s + 1)).all()) for s in range(world))
        seen["listed_after_peers"] = listed(name)
        del rows
        r.cleanup()
    group.barrier()
    seen["left"] = listed(name)
    return seen


def canonical(rank, world, group):
    """The canonical layout: every rank gets the same byte ranges (two
    canonical tensors per row, vLLM's create_next_canonical_view) and
    writes only its own shard of them; every rank then reads the whole
    pages as the writers assembled them."""
    shard = PAGE // 2 // world
    r = region(group, "canonical", rank, PAGE // world, PAGE)
    views = [r.create_next_canonical_view(PAGE // 2) for _ in range(2)]
    want = [torch.arange(world, dtype=torch.int8).repeat_interleave(shard) + 10 * t
            for t in range(2)]
    for t, v in enumerate(views):
        v[:, rank * shard:(rank + 1) * shard] = want[t][rank * shard:(rank + 1) * shard]
    group.barrier()
    seen = dict(facts=[[list(v.shape), list(v.stride()), v.storage_offset()] for v in views],
                assembled=all(bool((v == want[t]).all()) for t, v in enumerate(views)))
    group.barrier()
    del views
    r.cleanup()
    return seen

