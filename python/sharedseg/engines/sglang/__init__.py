# SPDX-License-Identifier: Apache-2.0
"""SGLang's adapter: its HiCache host pools in sharedseg segments
(plugin.py), and `python -m sharedseg.sglang --check` (check.py). ENGINE
is SGLang as the adapter sees it: the release it serves, how it is tested
there, and the names it takes from SGLang."""
from ..base import Engine

PLUGIN = "sharedseg.sglang"
STORAGE = "sharedseg.sglang (storage)"
MOONCAKE_ADAPTER = "sharedseg.sglang (mooncake)"
MOONCAKE = "sglang.srt.mem_cache.storage.mooncake_store.mooncake_store"
FACTORY = "sglang.srt.mem_cache.storage.backend_factory"
# The modules that call get_allocator_from_storage and
# host_memory_budget_bytes by the names they imported (0.5.23), and those
# that define them.
COMMON = "sglang.srt.mem_cache.pool_host.common"
BASE = "sglang.srt.mem_cache.pool_host.base"
USERS = (
    BASE,
    "sglang.srt.mem_cache.pool_host.mha",
    "sglang.srt.mem_cache.pool_host.mamba",
    "sglang.srt.mem_cache.pool_host.unified",
    "sglang.srt.mem_cache.pool_host.dsa",
    "sglang.srt.mem_cache.pool_host.minimax_m3_nvfp4",
    "sglang.srt.mem_cache.memory_pool_host",
)

ENGINE = Engine(
    "SGLang", ("sglang",),
    releases={"0.5.23": {
        PLUGIN: "python/tests/test_sglang.py on the engines leg (make test-python-pypi): "
                "SGLang's own MLA and MHA host pools on CPU over 2 and 4 gloo ranks, switched "
                "on by SHAREDSEG_SGLANG in spawned processes through its plugin loader; "
                "SGLang's host memory guard, without a budget scope of the tests' own",
        STORAGE: "python/tests/test_sglang_storage.py on the engines leg (make "
                 "test-python-pypi): the host pool as HiCache's storage tier, built by SGLang's "
                 "own storage factory from the documented configuration over SGLang's own MLA "
                 "and MHA host pools on CPU, in separate processes as separate engines",
        MOONCAKE_ADAPTER: "python/tests/test_sglang_mooncake.py on the engines leg (make "
                          "test-python-pypi): SGLang's own HiCacheController (prefetch "
                          "threads, MIN all-reduces) over its MLA host pool on CPU and gloo, "
                          "SGLang's Mooncake backend against a real Mooncake master "
                          "(mooncake-transfer-engine-non-cuda 0.3.13.post1, TCP), on one "
                          "host and as two hosts in network namespaces"}},
    names={PLUGIN: {**{m: ("get_allocator_from_storage", "host_memory_budget_bytes")
                       for m in USERS},
                    BASE: ("get_allocator_from_storage", "host_memory_budget_bytes",
                           "ranks_per_host"),
                    COMMON: ("get_allocator_from_storage", "HostTensorAllocator"),
                    "sglang.srt.mem_cache.pool_host.mla": ("MLATokenToKVPoolHost",),
                    "sglang.srt.runtime_context": ("get_parallel",),
                    FACTORY: ("StorageBackendFactory",)},
           STORAGE: {"sglang.srt.mem_cache.hicache_storage": ("HiCacheStorage",)},
           MOONCAKE_ADAPTER: {MOONCAKE: ("MooncakeStore",)}},
    release_parts=3)
