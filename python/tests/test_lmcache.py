# SPDX-License-Identifier: Apache-2.0
"""sharedseg.lmcache against the real LMCache (0.5.6, pinned by
tools/install-deps.sh): LocalCPUBackend over SharedSegMemoryAllocator, on
one rank (its own arena) and over 2 gloo ranks (one arena: rank 0 stores,
rank 1 reads rank 0's object from the segment, given its address)."""
import os
import subprocess
import sys

import pytest

from conftest import env_with_package, run_rank_script

pytestmark = pytest.mark.engine


def run_ranks(tmp_path, scenario):
    return run_rank_script(tmp_path, "lmcache_ranks.py", scenario, 2)


def test_the_tested_lmcache_is_installed():
    import importlib.metadata
    assert importlib.metadata.version("lmcache") == "0.5.6"


def test_rank0_stores_and_rank1_reads_it_from_the_one_segment(tmp_path):
    first, second = run_ranks(tmp_path, "share")
    assert first["allocates"] and not second["allocates"]
    assert first["contains"] and first["get_equal"] and first["in_segment"]
    assert second["allocate_refused"] == \
        f"rank 1 reads the segment '{first['name']}'; rank 0 allocates in it"
    assert second["read_equal"] is True
    for s in (first, second):
        # One arena for the two ranks, not one each; nothing left after close.
        assert s["listed"] == [dict(world_size=2, processes=2, size=4 << 20)]
        assert s["left"] == []


def test_ranks_that_disagree_on_the_size_get_the_same_error(tmp_path):
    for s in run_ranks(tmp_path, "disagree"):
        assert s["is_sharedseg"]
        assert "rank 1 declared size=8388608, rank 0 declared size=4194304" in s["error"]


def test_one_rank_backend_over_its_own_segment():
    import gc

    import torch
    from lmcache.utils import CacheEngineKey
    from lmcache.v1.config import LMCacheEngineConfig
    from lmcache.v1.memory_management import MemoryFormat
    from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend

    import sharedseg
    from sharedseg.lmcache import SharedSegMemoryAllocator
    allocator = SharedSegMemoryAllocator(2 << 20, pages="base", name=f"lmcache-{os.getpid()}")
    name = allocator.segment.name
    backend = LocalCPUBackend(LMCacheEngineConfig.from_defaults(chunk_size=256),
                              None, dst_device="cpu", memory_allocator=allocator)
    key = CacheEngineKey("m", 1, 0, 7, torch.float16)
    obj = backend.allocate(torch.Size([2, 1, 256, 128]), torch.float16, MemoryFormat.KV_2LTD)
    obj.tensor.fill_(3.0)
    backend.submit_put_task(key, obj)
    got = backend.get_blocking(key)
    assert backend.contains(key) and bool(got.tensor.eq(3.0).all())
    assert [s["world_size"] for s in sharedseg.list_segments() if s["name"] == name] == [1]
    got.ref_count_down()
    obj.ref_count_down()
    backend.close()
    del backend, got, obj, allocator
    gc.collect()
    assert [s for s in sharedseg.list_segments() if s["name"] == name] == []


def test_lmcaches_own_shm_and_hugepage_switches_are_refused():
    from sharedseg.lmcache import SharedSegMemoryAllocator
    with pytest.raises(ValueError, match="replaces shm_name and use_hugepages"):
        SharedSegMemoryAllocator(1 << 20, shm_name="x")


def test_another_lmcache_fails_with_a_sentence(monkeypatch):
    import sharedseg.lmcache as adapter
    monkeypatch.setattr(adapter, "_version", lambda: "0.4.0")
    with pytest.raises(RuntimeError, match=r"supports LMCache 0\.5\.6; this is LMCache 0\.4\.0"):
        adapter.SharedSegMemoryAllocator(1 << 20)


def test_importing_sharedseg_imports_no_engine():
    code = ("import sys, sharedseg; sys.exit(any(m in sys.modules for m in "
            "('vllm', 'sglang', 'lmcache', 'torch')))")
    assert subprocess.run([sys.executable, "-c", code], env=env_with_package()).returncode == 0


def test_the_documented_lines_build_the_backend():
    """docs/integrations.md's block, run as written."""
    import gc

    import sharedseg
    from conftest import doc_block
    from sharedseg.lmcache import SharedSegMemoryAllocator
    scope = {}
    exec(doc_block("python/tests/test_lmcache.py"), scope)
    backend, allocator = scope["backend"], scope["allocator"]
    assert backend.memory_allocator is allocator
    assert isinstance(allocator, SharedSegMemoryAllocator) and allocator.size == 256 << 20
    name = allocator.segment.name
    assert [s["size"] for s in sharedseg.list_segments() if s["name"] == name] == [256 << 20]
    backend.close()
    del scope, backend, allocator
    gc.collect()
    assert [s for s in sharedseg.list_segments() if s["name"] == name] == []


def test_read_at_after_close_raises():
    import gc

    from sharedseg import SharedSegmentError
    from sharedseg.lmcache import SharedSegMemoryAllocator
    allocator = SharedSegMemoryAllocator(2 << 20, pages="base", name=f"lmcache-rc-{os.getpid()}")
    assert allocator.read_at(4096, 16).numel() == 16
    allocator.close()
    with pytest.raises(SharedSegmentError, match=r"read_at: the allocator over segment "
                                                 r"'lmcache-rc-\d+-\d+' is closed"):
        allocator.read_at(4096, 16)
    del allocator
    gc.collect()
