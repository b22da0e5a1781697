# SPDX-License-Identifier: Apache-2.0
"""Ranks of a vLLM TP group on gloo, built with vLLM's own parallel state,
that drive SharedSegOffloadingSpec as vLLM's offloading connector does:
an OffloadingConfig and CanonicalKVCaches made by hand with CPU tensors,
the worker from the spec, stores and loads through it. Each rank writes
what it saw to OUT/rank<N>.json; test_vllm.py asserts on them.

    python vllm_ranks.py SCENARIOS WORLD PORT OUT    (comma-separated: replicated,
                                                     direct, background, too-big,
                                                     short-pool, disagree, pool,
                                                     pool-replicated; slots,
                                                     canonical:
                                                     vllm_region_ranks.py's)
"""
import contextlib
import os

import torch
import engine_ranks
from conftest import machine_lock

BLOCKS = 8           # the engine's KV blocks
PAGE = 16 * 576 * 2  # one block's bytes per tensor: 16 tokens of the 576-wide latent, bf16
PER_CHUNK = 2        # blocks per offloaded chunk


def config(rank, world, scenario, extra):
    from vllm.v1.kv_offload.config import (OffloadingCacheConfig, OffloadingConfig,
                                           OffloadingGroupConfig, OffloadingModelConfig,
                                           OffloadingParallelConfig)
    extra = dict({"spec_name": "SharedSegOffloadingSpec", "spec_module_path": "sharedseg.vllm",
                  "cpu_bytes_to_use": 1 << 20, "sharedseg": {"pages": "base"}}, **extra)
    if scenario == "background":
        extra["sharedseg"]["populate"] = "background"
    return OffloadingConfig(
        groups=(OffloadingGroupConfig(tokens_per_block=16, layer_names=("l0", "l1"), group_id=0),),
        worker_kv_bytes_per_block=2 * PAGE, enable_kv_cache_events=False, extra_config=extra,
        engine_id=f"unit-{scenario}-{os.getppid()}",
        model=OffloadingModelConfig(name="tiny", dtype="bfloat16"),
        cache=OffloadingCacheConfig(tokens_per_hash=16, blocks_per_chunk=PER_CHUNK),
        parallel=OffloadingParallelConfig(
            rank=rank, world_size=world, tp_size=world, pp_size=1, pcp_size=1, dcp_size=1,
            data_parallel_index=0, data_parallel_size=1, data_parallel_rank_local=None,
            is_parallelism_agnostic=False),
        replicated_layout=scenario in ("replicated", "background", "pool-replicated"))


def kv_caches():
    from vllm.v1.kv_offload.base import (CanonicalKVCacheRef, CanonicalKVCaches,
                                         CanonicalKVCacheTensor)
    tensors = [torch.zeros(BLOCKS, PAGE, dtype=torch.int8) for _ in range(2)]
    return tensors, CanonicalKVCaches(
        tensors=[CanonicalKVCacheTensor(t, PAGE) for t in tensors],
        group_data_refs=[[CanonicalKVCacheRef(0, PAGE), CanonicalKVCacheRef(1, PAGE)]])


def pattern(writer, tensor, block):
    g = torch.Generator().manual_seed(1000 * writer + 10 * tensor + block)
    return torch.randint(-128, 128, (PAGE,), dtype=torch.int8, generator=g)


def views(region_views):
    return [[list(v.shape), list(v.stride()), v.storage_offset()] for v in region_views]


def vllm_views(spec, slot, sizes, group):
    """The views vLLM's own SharedOffloadRegion gives for the same shape."""
    from vllm.v1.kv_offload.cpu.shared_offload_region import SharedOffloadRegion
    region = SharedOffloadRegion(engine_id=spec.config.engine_id + "-vllm",
                                 num_chunks=spec.num_chunks, rank=slot,
                                 kv_bytes_per_chunk=spec.kv_bytes_per_chunk,
                                 cpu_page_size=spec.cpu_page_size_per_worker,
                                 barrier=group.barrier)
    try:
        return views([region.create_next_worker_view(s) for s in sizes])
    finally:
        region.cleanup()


def round_trip(worker, tensors, rank, per_rank, group):
    """Stores engine blocks 1, 2, 3 into chunks 0 (two blocks) and 1 (one):
    every rank into its slot (per_rank), or rank 0 alone into the one copy;
    loads them back into blocks 4, 5, 6, and the second block of chunk 0
    alone (a chunk entered part-way) into block 7. Whether every block
    loaded is the one its writer stored."""
    from vllm.v1.kv_offload.base import GPULoadStoreSpec
    from vllm.v1.kv_offload.cpu.common import CPULoadStoreSpec
    for t in range(2):
        for b in (1, 2, 3):
            tensors[t][b] = pattern(rank, t, b)
    if rank == 0 or per_rank:
        worker.submit_store(10 + rank, GPULoadStoreSpec([1, 2, 3], [3], [0]),
                            CPULoadStoreSpec([0, 1]))
    group.barrier()
    for t in tensors:
        t.zero_()
    worker.submit_load(20 + rank, CPULoadStoreSpec([0, 1]), GPULoadStoreSpec([4, 5, 6], [3], [0]))
    worker.submit_load(30 + rank, CPULoadStoreSpec([0]), GPULoadStoreSpec([7], [1], [1]))
    source = rank if per_rank else 0
    return all(torch.equal(tensors[t][dst], pattern(source, t, src))
               for t in range(2) for dst, src in {4: 1, 5: 2, 6: 3, 7: 2}.items())


def transfers(rank, world, scenario, group):
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    import sharedseg
    from sharedseg.vllm import SharedSegOffloadingSpec
    from sharedseg.engines.vllm.cpu_worker import SharedSegCPUWorker

    spec = OffloadingSpecFactory.create_spec(config(rank, world, scenario, {}))
    tensors, caches = kv_caches()
    worker = spec.get_worker(caches)
    region = worker._region
    seen = dict(spec_class=type(spec).__name__, is_ours=isinstance(spec, SharedSegOffloadingSpec),
                worker_class=type(worker).__name__,
                cpu_worker=isinstance(worker, SharedSegCPUWorker),
                num_chunks=spec.num_chunks, row_stride=spec.kv_bytes_per_chunk,
                segment_size=region.segment.total_size(), slot=region.rank,
                views=views(region._views),
                vllm_views=vllm_views(spec, region.rank, [PAGE * PER_CHUNK] * 2, group),
                same_worker=spec.get_worker(caches) is worker)
    seen["populate"] = region.segment.info["settings"]["populate"]["value"]
    seen["loaded_equal"] = round_trip(worker, tensors, rank, scenario == "direct", group)
    seen["untouched_zero"] = all(int(tensors[t][b].abs().sum()) == 0
                                 for t in range(2) for b in (0, 1, 2, 3))
    seen["finished"] = sorted((r.job_id, r.success, r.transfer_size)
                              for r in worker.get_finished())
    seen["finished_again"] = worker.get_finished()
    region.segment.wait_populated(timeout=120)
    seen["resident"] = region.segment.populate_progress()
    group.barrier()
    mine = [s for s in sharedseg.list_segments() if s["name"] == region.segment.name]
    seen["listed"] = [dict(world_size=s["world_size"], processes=len(s["processes"]),
                           size=s["size"]) for s in mine]
    group.barrier()
    worker.shutdown()
    group.barrier()
    seen["left"] = [s["name"] for s in sharedseg.list_segments()
                    if s["name"] == region.segment.name]
    return seen


def pool_transfers(rank, world, scenario, group):
    """The region in the host pool ("sharedseg": {"pool": NAME}): every
    rank's worker maps the pool map-only (no slot) as its region, stores
    engine blocks into its slot of each chunk's row (pool: a slot per rank)
    or rank 0 alone into the one copy (pool-replicated), and loads them
    back; the facts to check that every rank maps one memfd."""
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    from sharedseg.engines.vllm.cpu_worker import SharedSegCPUWorker

    name = f"vr-{scenario}-{os.getppid()}"
    spec = OffloadingSpecFactory.create_spec(
        config(rank, world, scenario, {"sharedseg": {"pages": "base", "pool": name}}))
    tensors, caches = kv_caches()
    worker = spec.get_worker(caches)
    region = worker._region
    facts = region.segment.pool.info()
    seen = dict(cpu_worker=isinstance(worker, SharedSegCPUWorker), slot=region.rank,
                inode=facts["inode"], pool_slot=facts["slot"], chunk_size=facts["chunk_size"],
                chunks=facts["chunks"], row_stride=spec.kv_bytes_per_chunk,
                num_chunks=spec.num_chunks, views=views(region._views))
    seen["loaded_equal"] = round_trip(worker, tensors, rank, scenario == "pool", group)
    group.barrier()
    worker.shutdown()
    return seen


def refused(rank, world, scenario, group):
    """A configuration the group must refuse together: more than the host's
    memory (when the spec is built), more than the HugeTLB pool holds now
    (when the region is made), or ranks that disagree on the region's shape."""
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    import sharedseg
    if scenario == "too-big":
        extra = {"cpu_bytes_to_use": 1 << 40}
    elif scenario == "short-pool":  # more 2 MiB pages than the pool can ever hold
        pages = [sum(int(open(f"/sys/kernel/mm/hugepages/hugepages-2048kB/{knob}").read())
                     for knob in ("nr_hugepages", "nr_overcommit_hugepages")) + 2]
        torch.distributed.broadcast_object_list(pages, src=0)  # rank 0's reading, for all
        extra = {"cpu_bytes_to_use": pages[0] << 21, "sharedseg": {"pages": "hugetlb-2M"}}
    else:
        extra = {"cpu_bytes_to_use": (1 << 20) * (rank + 1)}
    before = [s["name"] for s in sharedseg.list_segments()]
    try:
        # No test changes the HugeTLB pool meanwhile (those that do hold the
        # machine lock exclusive).
        with machine_lock() if scenario == "short-pool" else contextlib.nullcontext():
            spec = OffloadingSpecFactory.create_spec(config(rank, world, scenario, extra))
            spec.get_worker(kv_caches()[1])
        return dict(error=None)
    except Exception as e:
        return dict(error=f"{type(e).__name__}: {e}", errno=getattr(e, "errno", None),
                    is_sharedseg=isinstance(e, sharedseg.SharedSegmentError),
                    left=[s["name"] for s in sharedseg.list_segments() if s["name"] not in before])


@contextlib.contextmanager
def tp_group(rank, world, port):
    """vLLM's own TP group of WORLD ranks on gloo (vllm_region_ranks.py's too)."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed.parallel_state import (get_tp_group, init_distributed_environment,
                                                 initialize_model_parallel)
    with set_current_vllm_config(VllmConfig()):
        init_distributed_environment(world_size=world, rank=rank, local_rank=rank,
                                     distributed_init_method=f"tcp://127.0.0.1:{port}",
                                     backend="gloo")
        initialize_model_parallel(tensor_model_parallel_size=world)
        yield get_tp_group()


def rank_main(rank, scenarios, world, port):
    import vllm_region_ranks
    with tp_group(rank, world, port) as group:
        seen = {}
        for name in scenarios.split(","):
            if name in ("slots", "canonical"):  # the region alone (test_vllm_region.py)
                seen[name] = getattr(vllm_region_ranks, name)(rank, world, group)
                continue
            run = (refused if name in ("too-big", "short-pool", "disagree") else
                   pool_transfers if name.startswith("pool") else transfers)
            seen[name] = run(rank, world, name, group)
        return seen


if __name__ == "__main__":
    engine_ranks.main(rank_main)
