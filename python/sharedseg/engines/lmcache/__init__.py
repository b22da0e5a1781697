# SPDX-License-Identifier: Apache-2.0
"""LMCache's adapters: its CPU tier in one segment (tier.py, LMCache's
storage plugin), the host tier every LMCache instance on the host shares in
the host pool (pool.py, another storage plugin), and under vLLM the
connector that switches the CPU tier on
(connector.py, which takes vLLM's names from sharedseg.engines.vllm).
ENGINE is LMCache as they see it: the release each serves, how each is
tested there, and the names each takes from LMCache."""
from ..base import Engine

TIER = "sharedseg.lmcache"
CONNECTOR = "sharedseg.lmcache_vllm"
POOL = "sharedseg.engines.lmcache.pool"

ENGINE = Engine(
    "LMCache", ("lmcache",),
    releases={"0.5.6": {
        TIER: "python/tests/test_lmcache.py on the engines leg (make test-python-pypi): "
              "LMCache's own engine, built by LMCacheEngineBuilder from the documented "
              "configuration, over 2 gloo ranks: rank 0 stores, rank 1 reads the bytes from "
              "the segment it maps, one copy in /proc; a rank that refuses its configuration, "
              "then both pairing",
        POOL: "python/tests/test_lmcache_pool.py on the engines leg (make test-python-pypi): "
              "two LMCache 0.5.6 engines built by LMCacheEngineBuilder in separate processes "
              "name one pool: what one stores the other retrieves, bytes equal, stored once; "
              "another declaration refused; killed while pinning; Mooncake Store "
              "(mooncakestore://, a real master) beside the pool",
        CONNECTOR: "python/tests/test_lmcache.py and test_lmcache_refusals.py on the engines "
                   "leg (make test-python-pypi): LMCache 0.5.6's own vLLM integration loads "
                   "its configuration, applies the connector's rewrite with its own function "
                   "and builds the tier from it; every refusal judged on the configuration "
                   "LMCache builds from"}},
    # The connector's are LMCache's vLLM integration's configuration (which
    # imports vLLM, so not the tier's) and how it applies the "lmcache." keys.
    names={TIER: {"lmcache.v1.memory_allocators.mixed_memory_allocator":
                  ("MixedMemoryAllocator",),
                  "lmcache.v1.memory_allocators.tensor_memory_allocator":
                  ("TensorMemoryAllocator",),
                  "lmcache.v1.storage_backend.local_cpu_backend": ("LocalCPUBackend",)},
           POOL: {"lmcache.v1.storage_backend.abstract_backend": ("StoragePluginInterface",),
                  "lmcache.v1.memory_management": ("MemoryFormat",)},
           CONNECTOR: {"lmcache.integration.vllm.utils": ("lmcache_get_or_create_config",),
                       "lmcache.v1.config_base": ("validate_and_set_config_value",)}},
    release_parts=3)
