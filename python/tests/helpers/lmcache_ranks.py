# SPDX-License-Identifier: Apache-2.0
"""Two gloo ranks, each building LMCache's own engine with LMCacheEngineBuilder
from the configuration docs/integrations.md gives ($LMCACHE_CONFIG_FILE,
read as LMCache reads it, at a test's size): rank 0 stores through the
engine, rank 1 reads what it stored from the segment it maps; and (vllm)
the same through the documented vLLM line's connector, as vLLM builds it,
after each worker was refused the lines in REFUSED.
Each rank writes what it saw to OUT/rank<N>.json; test_lmcache.py asserts
on them.

    python lmcache_ranks.py SCENARIOS 2 PORT OUT   (SCENARIOS: engine,desync,disagree,vllm)

LMCache's engine runs on its MockGPUConnector (its own, for hosts without
a GPU), whose from_gpu here fills each chunk with its first token's number:
it stands for the device copy.
"""
import gc
import glob
import os
import re

import torch
import torch.distributed as dist

import engine_ranks

SIZE_GB = 4 / 1024  # 4 MiB: sharedseg.max_local_cpu_size at a test's size
TOKENS = 64
KV_SHAPE = (2, 1, 16, 1, 576)  # MLA: (layers, 1, chunk tokens, 1, latent width)


def config(**extra):
    from lmcache.v1.config import LMCacheEngineConfig
    cfg = LMCacheEngineConfig.from_file(os.environ["LMCACHE_CONFIG_FILE"])
    cfg.chunk_size = KV_SHAPE[2]
    # Rank 1 builds a CPU tier too (for MLA LMCache builds rank 0's alone
    # unless its lookup servers are named), which then maps rank 0's.
    cfg.lookup_server_worker_ids = [0, 1]
    cfg.extra_config = dict(cfg.extra_config, **{"sharedseg.max_local_cpu_size": SIZE_GB})
    cfg.extra_config["sharedseg"] = dict(cfg.extra_config.get("sharedseg") or {}, **extra)
    return cfg


def filling(kv_shape):
    """LMCache's MockGPUConnector, whose from_gpu fills each chunk with its
    first token's number (it stands for the device copy)."""
    from lmcache.v1.gpu_connector.mock_gpu_connector import MockGPUConnector

    class Filling(MockGPUConnector):
        def batched_from_gpu(self, memory_objs, starts, ends, **kwargs):
            for obj, start in zip(memory_objs, starts):
                obj.tensor.fill_(start + 1)
    return Filling(kv_shape)


def engine(rank, instance, cfg):
    from lmcache.v1.cache_engine import LMCacheEngineBuilder
    from lmcache.v1.metadata import LMCacheMetadata

    # A model name of this run's own: copies of the test may run at once,
    # and the segment's name is made of it.
    metadata = LMCacheMetadata(model_name=f"tiny-mla-{os.getppid()}", world_size=2,
                               local_world_size=2, worker_id=rank, local_worker_id=rank,
                               kv_dtype=torch.bfloat16, kv_shape=KV_SHAPE, use_mla=True,
                               role="worker")
    built = LMCacheEngineBuilder.get_or_create(
        instance, cfg, metadata, filling(KV_SHAPE),
        lambda t, src: dist.broadcast(t, src), lambda o, src: o)
    try:
        built.post_init()
    except BaseException:
        _stop_storage_loop()
        LMCacheEngineBuilder.destroy(instance)
        raise
    return built


def _stop_storage_loop():
    """LMCache 0.5.6 starts its storage manager's event-loop thread (not a
    daemon) before it builds the backends, and leaves it running when a
    backend fails: stop it, or this process never exits."""
    import threading
    for thread in threading.enumerate():
        if thread.name == "storage-manager-event-loop":
            loop = thread._args[0]
            loop.call_soon_threadsafe(loop.stop)
            thread.join()


def mapped(name):
    """Rss and Pss (KiB) of this process's mappings of the segment's memfd."""
    rss = pss = 0
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            if re.match(r"[0-9a-f]+-[0-9a-f]+ ", line):
                fields = line.split(maxsplit=5)
                path = fields[5].strip() if len(fields) > 5 else ""
                inside = path.removesuffix(" (deleted)") == f"/memfd:sseg:{name}"
            elif inside and line.startswith("Rss:"):
                rss += int(line.split()[1])
            elif inside and line.startswith("Pss:"):
                pss += int(line.split()[1])
    return rss, pss


def listed(name):
    import sharedseg
    return [dict(world_size=s["world_size"], processes=len(s["processes"]), size=s["size"])
            for s in sharedseg.list_segments() if s["name"] == name]


def stores(rank):
    from lmcache.v1.cache_engine import LMCacheEngineBuilder
    return share(rank, engine(rank, "share", config()),
                 lambda: LMCacheEngineBuilder.destroy("share"))


def share(rank, built, destroy):
    """Rank 0 stores through LMCache's engine built, rank 1 reads what it
    stored from the segment it maps; then destroy() ends the engine."""
    backend = built.storage_manager.local_cpu_backend
    allocator = backend.memory_allocator
    name = allocator.segment.name
    seen = dict(backend=type(backend).__name__, allocator=type(allocator).__name__, name=name,
                allocates=allocator.allocates)
    where = [None]
    if rank == 0:
        built.store(tokens=torch.arange(TOKENS))
        objs = list(backend.hot_cache.values())
        lo = allocator.segment.base_addr()
        seen["stored"] = len(objs)
        seen["in_segment"] = all(lo <= o.tensor.data_ptr() < lo + allocator.size for o in objs)
        where = [[(o.metadata.address, o.get_size(), o.tensor.flatten()[0].item()) for o in objs]]
        del objs  # views of the arena: the mapping lives while they do
    dist.broadcast_object_list(where, src=0)
    if rank == 1:
        try:
            allocator.allocate(torch.Size([16, 576]), torch.bfloat16)
            seen["allocate_refused"] = None
        except RuntimeError as e:
            seen["allocate_refused"] = str(e)
        # What LMCache would read here (it broadcasts from rank 0 instead).
        seen["read"] = [bool(allocator.read_at(a, n).view(torch.bfloat16).eq(first).all())
                        for a, n, first in where[0]]
        seen["values"] = [first for _, _, first in where[0]]
        allocator.read_at(0, allocator.size).sum()  # every page in this process too
    dist.barrier()
    seen["rss_kib"], seen["pss_kib"] = mapped(name)
    seen["size"] = allocator.size
    seen["listed"] = listed(name)
    dist.barrier()
    del backend, allocator
    destroy()
    del built
    gc.collect()
    dist.barrier()
    seen["left"] = listed(name)
    return seen


def desync(rank):
    """Rank 1 refuses its configuration before its call (a setting it does
    not know); rank 0 waits for it until its timeout. Both fail; then both
    build again, and pair."""
    from lmcache.v1.cache_engine import LMCacheEngineBuilder
    seen = {}
    bad = dict(colour="red") if rank == 1 else {}
    try:
        engine(rank, "desync", config(timeout=3, **bad))
        seen["first"] = None
    except BaseException as e:
        seen["first"] = f"{type(e).__name__}: {e}"
    dist.barrier()
    built = engine(rank, "desync", config(timeout=30))
    allocator = built.storage_manager.local_cpu_backend.memory_allocator
    seen["second"] = allocator.segment.name
    seen["listed"] = listed(allocator.segment.name)
    dist.barrier()
    del allocator
    LMCacheEngineBuilder.destroy("desync")
    del built
    gc.collect()
    return seen


def disagree(rank):
    import sharedseg
    from sharedseg.lmcache import SharedSegMemoryAllocator
    try:
        SharedSegMemoryAllocator((4 << 20) * (rank + 1), dist.group.WORLD, pages="base",
                                 name=f"lmcache-{os.getppid()}")
        return dict(error=None)
    except Exception as e:
        return dict(error=f"{type(e).__name__}: {e}",
                    is_sharedseg=isinstance(e, sharedseg.SharedSegmentError))


def through_vllm(rank):
    """The documented line's connector ($SSEG_KV_TRANSFER_CONFIG, the
    --kv-transfer-config test_lmcache.py parsed with vLLM's parser, at a
    test's page kind) as vLLM builds it: its KVConnectorFactory, in a
    scheduler (rank 0, as vLLM's engine core) and in each worker of vLLM's
    own TP group, over the plain LMCache configuration
    $SSEG_LMCACHE_PLAIN. The one stand-in: LMCache's vLLM connectors
    need CUDA, so CreateGPUConnector gives LMCache's MockGPUConnector."""
    import json

    import lmcache.v1.gpu_connector
    from vllm.config import KVTransferConfig, ModelConfig, ParallelConfig, VllmConfig
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

    os.environ["LMCACHE_CONFIG_FILE"] = os.environ["SSEG_LMCACHE_PLAIN"]
    lmcache.v1.gpu_connector.CreateGPUConnector = \
        lambda config, metadata, engine, layout_hints=None: filling(metadata.kv_shape)
    kv = KVTransferConfig(**json.loads(os.environ["SSEG_KV_TRANSFER_CONFIG"]))
    vllm_config = VllmConfig(
        model_config=ModelConfig(model=os.environ["SSEG_MODEL_DIR"], skip_tokenizer_init=True,
                                 dtype="bfloat16", max_model_len=512), kv_transfer_config=kv,
        parallel_config=ParallelConfig(tensor_parallel_size=2))
    vllm_config.parallel_config.rank = rank  # as vLLM's executor gives each worker
    vllm_config.cache_config.kv_cache_layout = "LBNHC"  # the engine core resolves it
    # What vLLM's CPU worker sets before its TP group: its CPU communicator
    # names its /dev/shm files with it (removed below, as vLLM leaves them).
    os.environ["VLLM_DIST_IDENT"] = ident = f"sseg-lmcache-{os.getppid()}"
    try:
        return _through_vllm(rank, vllm_config, KVConnectorFactory, KVConnectorRole)
    finally:
        dist.barrier()
        if rank == 0:
            for path in glob.glob(f"/dev/shm/*{ident}*"):
                os.unlink(path)


def _through_vllm(rank, vllm_config, KVConnectorFactory, KVConnectorRole):
    from lmcache.integration.vllm.utils import ENGINE_NAME
    from lmcache.v1.cache_engine import LMCacheEngineBuilder
    from vllm.config import set_current_vllm_config
    from vllm.distributed.parallel_state import (init_distributed_environment,
                                                 initialize_model_parallel)
    with set_current_vllm_config(vllm_config):
        # On the default group the frame made: vLLM takes it as its world.
        init_distributed_environment(world_size=2, rank=rank, local_rank=rank, backend="gloo")
        initialize_model_parallel(tensor_model_parallel_size=2)
        seen = {"refused": refused(vllm_config, KVConnectorFactory, KVConnectorRole)}
        if rank == 0:
            scheduler = KVConnectorFactory.create_connector(vllm_config,
                                                            KVConnectorRole.SCHEDULER, None)
            seen["scheduler"] = type(scheduler).__name__
            seen["scheduler_engine"] = scheduler._lmcache_engine.lmcache_engine is not None
        worker = KVConnectorFactory.create_connector(vllm_config, KVConnectorRole.WORKER, None)
        seen["worker"] = type(worker).__name__
        # vLLM's worker registers its KV caches: LMCache builds its tiers then.
        worker.register_kv_caches({f"model.layers.{i}.self_attn.attn":
                                   torch.zeros(4, 16, 576, dtype=torch.bfloat16)
                                   for i in range(2)})
        applied = worker._lmcache_engine.config
        seen["applied"] = dict(max_local_cpu_size=applied.max_local_cpu_size,
                               storage_plugins=applied.storage_plugins)
        del applied
        # vLLM's shutdown of the connector is its base's, which does nothing
        # (LMCache's own closes its offload server's socket under the thread
        # that reads it, which ZMQ aborts on): the engine goes as LMCache's
        # builder destroys it.
        seen.update(share(rank, worker._lmcache_engine.lmcache_engine,
                          lambda: LMCacheEngineBuilder.destroy(ENGINE_NAME)))
        return seen


# Lines the connector refuses as a worker of the TP group builds it, before
# LMCache builds anything (test_lmcache_refusals.py has every value, in one
# process): a size LMCache's plugin loader used to log and go on past, a
# disk tier LMCache builds over the CPU tier the connector leaves out.
REFUSED = {"size": {"lmcache.max_local_cpu_size": "inf"},
           "disk": {"lmcache.local_disk": "/nonexistent/lmcache-disk",
                    "lmcache.max_local_disk_size": 1}}


def refused(vllm_config, KVConnectorFactory, KVConnectorRole):
    """What building the worker's connector from each REFUSED line raised
    (None: it was built)."""
    import json

    from vllm.config import KVTransferConfig
    line = json.loads(os.environ["SSEG_KV_TRANSFER_CONFIG"])
    documented, said = vllm_config.kv_transfer_config, {}
    for name, extra in REFUSED.items():
        vllm_config.kv_transfer_config = KVTransferConfig(**dict(
            line, kv_connector_extra_config=dict(line["kv_connector_extra_config"], **extra)))
        try:
            KVConnectorFactory.create_connector(vllm_config, KVConnectorRole.WORKER, None)
            said[name] = None
        except ValueError as e:
            said[name] = str(e)
    vllm_config.kv_transfer_config = documented
    return said


SCENARIOS = dict(engine=stores, desync=desync, disagree=disagree, vllm=through_vllm)


def rank_main(rank, scenarios, world, port):
    assert world == 2, "lmcache_ranks.py runs 2 ranks"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    return {name: SCENARIOS[name](rank) for name in scenarios.split(",")}


if __name__ == "__main__":
    engine_ranks.main(rank_main)
