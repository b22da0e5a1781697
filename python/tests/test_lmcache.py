# SPDX-License-Identifier: Apache-2.0
"""sharedseg.lmcache against the real LMCache (0.5.6, pinned by
tools/install-deps.sh), switched on by the configuration that
docs/integrations.md gives: LMCache's own engine, built by
LMCacheEngineBuilder over 2 gloo ranks (lmcache_ranks.py), stores on rank 0
into one segment that rank 1 maps and reads, one copy in /proc; a rank
that refuses its configuration fails both and the next engine pairs; the
workers refuse vLLM lines the tier cannot serve (test_lmcache_refusals.py
has every value); and, in one process, what the tier refuses and the pin
default."""
import subprocess
import sys

import pytest

from conftest import doc_block, env_with_package, run_rank_script

pytestmark = pytest.mark.engine

DOC = "python/tests/test_lmcache.py"


# The blocks docs/integrations.md gives: the vLLM line, LMCache's plugin
# configuration.
LINE, PLUGIN_BLOCK = 0, 1


def documented_line():
    """The kv_transfer_config of the documented `vllm serve` line, as
    vLLM's own parser makes it."""
    from conftest import vllm_serve
    return vllm_serve(DOC, nth=LINE).kv_transfer_config


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """One run of the rank scripts for the scenarios below (each rank
    imports torch and LMCache once)."""
    import json

    import vllm_engine
    tmp = tmp_path_factory.mktemp("lmcache")
    path = tmp / "lmcache.yaml"
    path.write_text(doc_block(DOC, nth=PLUGIN_BLOCK))
    # Under vLLM: the user's LMCache configuration as it is, the tier's
    # size its max_local_cpu_size; the documented line, at a test's page
    # kind; the tiny model's config.json (vLLM's ModelConfig reads it).
    plain = tmp / "plain.yaml"
    plain.write_text("chunk_size: 16\nmax_local_cpu_size: 0.00390625\n"
                     "lookup_server_worker_ids: [0, 1]\n")
    kv = documented_line()
    line = dict(kv_connector=kv.kv_connector, kv_role=kv.kv_role,
                kv_connector_module_path=kv.kv_connector_module_path,
                kv_connector_extra_config=dict(kv.kv_connector_extra_config,
                                               sharedseg={"pages": "base"}))
    vllm_engine.model_config("deepseek").save_pretrained(tmp / "model")
    env = dict(env_with_package(), LMCACHE_CONFIG_FILE=str(path), SSEG_LMCACHE_PLAIN=str(plain),
               SSEG_KV_TRANSFER_CONFIG=json.dumps(line), SSEG_MODEL_DIR=str(tmp / "model"))
    return run_rank_script(tmp, "lmcache_ranks.py", "engine,desync,disagree,vllm", 2,
                           timeout=600, env=env)


def test_the_tested_lmcache_is_installed():
    import importlib.metadata
    assert importlib.metadata.version("lmcache") == "0.5.6"


def test_lmcaches_engine_stores_on_rank0_into_the_segment_rank1_maps(ranks):
    first, second = (r["engine"] for r in ranks)
    for s in (first, second):
        # LMCache's own storage manager built our tier, from the configuration.
        assert (s["backend"], s["allocator"]) == ("SharedSegCPUBackend",
                                                   "SharedSegMemoryAllocator")
        assert s["name"] == first["name"] and s["name"].endswith("-LocalCPUBackend-tp2")
        # One segment for the two ranks; nothing left after the engines went.
        assert s["listed"] == [dict(world_size=2, processes=2, size=s["size"])]
        assert s["left"] == []
    assert first["allocates"] and not second["allocates"]
    assert first["stored"] == 4 and first["in_segment"]  # 64 tokens in chunks of 16
    assert second["allocate_refused"] == \
        f"rank 1 reads the segment '{first['name']}'; rank 0 allocates in it"
    assert second["values"] == [1.0, 17.0, 33.0, 49.0] and second["read"] == [True] * 4


def test_the_documented_vllm_line_loads_our_connector():
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    from sharedseg.lmcache_vllm import SharedSegLMCacheConnector
    kv = documented_line()
    assert kv.kv_role == "kv_both" and kv.kv_connector_extra_config == {}
    assert KVConnectorFactory.get_connector_class(kv) is SharedSegLMCacheConnector


def test_through_the_vllm_line_lmcaches_engine_stores_into_one_segment(ranks):
    first, second = (r["vllm"] for r in ranks)
    # vLLM's factory built ours; the scheduler builds no engine (LMCache's
    # default), each worker's LMCache engine has our tier.
    assert (first["scheduler"], first["scheduler_engine"]) == ("SharedSegLMCacheConnector", False)
    for s in (first, second):
        assert s["worker"] == "SharedSegLMCacheConnector"
        # LMCache applied the rewrite: no CPU tier of its own, ours as a plugin.
        assert s["applied"] == dict(max_local_cpu_size=0.0, storage_plugins=["LocalCPUBackend"])
        assert (s["backend"], s["allocator"]) == ("SharedSegCPUBackend",
                                                   "SharedSegMemoryAllocator")
        # The size is LMCache's own max_local_cpu_size, one segment for both.
        assert s["size"] == 4 << 20
        assert s["listed"] == [dict(world_size=2, processes=2, size=4 << 20)]
        assert s["left"] == []
    assert first["name"] == second["name"]
    assert first["stored"] == 4 and first["in_segment"]
    assert second["values"] == [1.0, 17.0, 33.0, 49.0] and second["read"] == [True] * 4
    kib = first["size"] // 1024
    assert abs(first["pss_kib"] + second["pss_kib"] - kib) <= 8


def test_through_the_vllm_line_a_worker_refuses_what_the_tier_cannot_serve(ranks):
    from test_lmcache_refusals import DISK, SIZE
    for s in (r["vllm"] for r in ranks):
        # At the connector's construction, before LMCache builds anything:
        # LMCache's plugin loader logged the size's error and went on without
        # a CPU tier; its disk tier failed on the CPU tier it no longer had.
        assert s["refused"] == {
            "size": f"kv_connector_extra_config's lmcache.max_local_cpu_size is 'inf': {SIZE}",
            "disk": f"LMCache's local_disk is '/nonexistent/lmcache-disk': {DISK}"}


def lmcache_config(**fields):
    from lmcache.v1.config import LMCacheEngineConfig
    config = LMCacheEngineConfig.from_defaults()
    for key, value in fields.items():
        setattr(config, key, value)
    return config


def test_the_rewrite_moves_lmcaches_size_to_the_shared_tier():
    from sharedseg import lmcache, lmcache_vllm
    keys = lmcache_vllm.rewrite({"sharedseg": {"pages": "thp"},
                                 "lmcache.max_local_cpu_size": 8},
                                lmcache_config(max_local_cpu_size=5.0,
                                               extra_config={"save_only_first_rank": True}))
    assert keys == {"lmcache.max_local_cpu_size": 0.0,
                    "lmcache.storage_plugins": ["LocalCPUBackend"],
                    "lmcache.extra_config": dict(lmcache.PLUGIN, save_only_first_rank=True,
                                                 **{"sharedseg.max_local_cpu_size": 8.0,
                                                    "sharedseg": {"pages": "thp"}})}


@pytest.mark.parametrize("extra, fields, why", [
    ({}, dict(max_local_cpu_size=0.0), "LMCache's max_local_cpu_size is 0.0: expected the "
                                       "shared tier's size in GB"),
    ({}, dict(storage_plugins=["Mine"]), "LMCache's storage_plugins is ['Mine']: expected none"),
    ({"sharedseg": {"colour": "red"}}, {}, "unknown sharedseg setting 'colour' in "
                                           "kv_connector_extra_config[\"sharedseg\"]"),
    ({"sharedseg": {"keep": "k"}}, {}, "sharedseg setting keep in"),
])
def test_what_the_rewrite_cannot_serve_is_one_sentence(extra, fields, why):
    from sharedseg import lmcache_vllm
    with pytest.raises(ValueError) as e:
        lmcache_vllm.rewrite(extra, lmcache_config(**fields))
    assert str(e.value).startswith(why)


def test_a_configuration_that_names_the_plugin_is_left_as_it_is():
    from types import SimpleNamespace

    from sharedseg import lmcache_vllm
    config = documented_config()
    assert lmcache_vllm.names_the_plugin({}, config)
    assert not lmcache_vllm.names_the_plugin({}, lmcache_config())
    # What the rewrite wrote names it too: a second connector in the same
    # process (the scheduler's and a worker's at TP=1) leaves it.
    written = lmcache_vllm.rewrite({}, lmcache_config())
    assert lmcache_vllm.names_the_plugin(written, lmcache_config())
    kv = SimpleNamespace(kv_connector_extra_config={"sharedseg": {"pages": "thp"}})
    with pytest.raises(ValueError, match=r"names the sharedseg plugin itself: its settings are "
                                         r"extra_config's sharedseg \(\{'pages': 'auto'\}\)"):
        lmcache_vllm.switch_on(kv, config)
    kv = SimpleNamespace(kv_connector_extra_config={})
    lmcache_vllm.switch_on(kv, config)
    assert kv.kv_connector_extra_config == {}


def test_another_vllm_fails_the_connector_with_a_sentence(monkeypatch):
    import sharedseg.lmcache_vllm as adapter
    monkeypatch.setattr(adapter.ENGINE, "version", lambda: "0.31.0")
    with pytest.raises(RuntimeError, match=r"sharedseg.lmcache_vllm supports vLLM 0\.32; this is "
                                           r"vLLM 0\.31\.0"):
        adapter.SharedSegLMCacheConnector(None, None)


def test_host_memory_is_one_copy(ranks):
    """Both ranks have every page of the memfd resident, and their
    proportional shares (Pss, from /proc/self/smaps) sum to one copy."""
    first, second = (r["engine"] for r in ranks)
    kib = first["size"] // 1024
    assert first["rss_kib"] == second["rss_kib"] == kib
    assert abs(first["pss_kib"] + second["pss_kib"] - kib) <= 8


def test_a_rank_that_refuses_fails_both_and_the_next_engine_pairs(ranks):
    first, second = (r["desync"] for r in ranks)
    assert second["first"].startswith("SystemExit: sharedseg.lmcache (LocalCPUBackend storage "
                                      "plugin): unknown sharedseg setting 'colour' in "
                                      "extra_config's sharedseg")
    assert first["first"].startswith("SystemExit: sharedseg.lmcache (LocalCPUBackend storage "
                                     "plugin): segment '")
    assert "rank 1 did not reach the setup exchange" in first["first"]
    assert first["second"] == second["second"]
    assert first["listed"] == [dict(world_size=2, processes=2, size=4 << 20)]


def test_ranks_that_disagree_on_the_size_get_the_same_error(ranks):
    for s in (r["disagree"] for r in ranks):
        assert s["is_sharedseg"]
        assert "rank 1 declared size=8 MiB, rank 0 declared size=4 MiB" in s["error"]


# ---- in one process ----

def documented_config(**changes):
    import tempfile

    from lmcache.v1.config import LMCacheEngineConfig
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(doc_block(DOC, nth=PLUGIN_BLOCK))
        f.flush()
        config = LMCacheEngineConfig.from_file(f.name)
    for key, value in changes.items():
        setattr(config, key, value)
    return config


def metadata(world_size=1, use_mla=True, role="worker", model="m"):
    import torch
    from lmcache.v1.metadata import LMCacheMetadata
    return LMCacheMetadata(model_name=model, world_size=world_size, local_world_size=world_size,
                           worker_id=0, local_worker_id=0, kv_dtype=torch.bfloat16,
                           kv_shape=(2, 1, 16, 1, 576), use_mla=use_mla, role=role)


def test_the_documented_configuration_plans_one_segment():
    from sharedseg import lmcache
    plan = lmcache.plan(documented_config(), metadata())
    assert plan["size"] == 5 << 30 and plan["world_size"] == 1 and plan["replicated"]
    assert plan["request"].pages == "auto" and plan["request"].pin == "auto"
    # MLA over 2 ranks, LMCache's defaults: rank 0 alone builds a tier.
    assert lmcache.tier_ranks(documented_config(), metadata(2)) == [0]
    assert lmcache.tier_ranks(documented_config(lookup_server_worker_ids=[0, 1]),
                              metadata(2)) == [0, 1]
    assert lmcache.tier_ranks(documented_config(), metadata(2, use_mla=False)) == [0, 1]
    assert not lmcache.plan(documented_config(), metadata(2, use_mla=False))["replicated"]


@pytest.mark.parametrize("changes, why", [
    (dict(max_local_cpu_size=5.0), "max_local_cpu_size is 5.0: set it to 0"),
    (dict(storage_plugins=["LocalCPUBackend", "Mine"]),
     "storage_plugins is ['LocalCPUBackend', 'Mine']: name LocalCPUBackend alone"),
    (dict(local_disk="/tmp/x"), "local_disk is '/tmp/x': LMCache builds its disk tier"),
    (dict(enable_p2p=True), "enable_p2p is True: LMCache builds its P2P tier"),
    (dict(enable_controller=True), "enable_controller is True: LMCache gives storage plugins "
                                   "no controller worker; leave enable_controller unset"),
    (dict(extra_config={"storage_plugin.LocalCPUBackend.module_path": "sharedseg.lmcache"}),
     "extra_config's sharedseg.max_local_cpu_size is None: expected the shared tier's size"),
])
def test_what_the_tier_does_not_serve_is_refused_with_a_sentence(changes, why):
    from sharedseg import lmcache
    assert lmcache.refusal(documented_config(**changes), metadata()).startswith(why)
    with pytest.raises(SystemExit) as e:
        lmcache.SharedSegCPUBackend(documented_config(**changes), "cpu", metadata())
    assert str(e.value).startswith(f"sharedseg.lmcache (LocalCPUBackend storage plugin): {why}")


def test_the_scheduler_and_lookup_servers_on_some_ranks_are_refused():
    from sharedseg import lmcache
    assert lmcache.refusal(documented_config(), metadata(role="scheduler")) == \
        "the tier serves LMCache's workers, not its scheduler"
    with pytest.raises(ValueError, match=r"LMCache builds a CPU tier on ranks \[0, 1\] of 4"):
        lmcache.plan(documented_config(lookup_server_worker_ids=[0, 1]), metadata(4))


def test_another_lmcache_fails_with_a_sentence(monkeypatch):
    import sharedseg.lmcache as adapter
    monkeypatch.setattr(adapter.ENGINE, "version", lambda: "0.4.0")
    with pytest.raises(RuntimeError, match=r"supports LMCache 0\.5\.6; this is LMCache 0\.4\.0"):
        adapter.SharedSegMemoryAllocator(1 << 20)
    with pytest.raises(SystemExit, match=r"\(LocalCPUBackend storage plugin\): sharedseg.lmcache "
                                         r"supports LMCache 0\.5\.6; this is LMCache 0\.4\.0"):
        adapter.SharedSegCPUBackend(documented_config(), "cpu", metadata())


def test_lmcaches_own_shm_hugepage_and_paging_switches_are_refused():
    from sharedseg.lmcache import SharedSegMemoryAllocator
    with pytest.raises(ValueError, match="replaces shm_name, use_hugepages and use_paging"):
        SharedSegMemoryAllocator(1 << 20, shm_name="x")


def test_one_rank_builds_lmcaches_engine_over_its_own_segment():
    import gc
    import os

    import torch
    from lmcache.v1.cache_engine import LMCacheEngineBuilder
    from lmcache.v1.gpu_connector.mock_gpu_connector import MockGPUConnector

    import sharedseg
    config = documented_config(chunk_size=16)
    config.extra_config.update({"sharedseg.max_local_cpu_size": 2 / 1024,
                                "sharedseg": {"pages": "base"}})
    # A model name of this process's own: copies of the test may run at once.
    md = metadata(model=f"m{os.getpid()}")
    built = LMCacheEngineBuilder.get_or_create("one", config, md, MockGPUConnector(md.kv_shape),
                                               lambda t, s: t, lambda o, s: o)
    built.post_init()
    backend = built.storage_manager.local_cpu_backend
    name = backend.memory_allocator.segment.name
    assert name == f"lmcache-m{os.getpid()}-LocalCPUBackend-tp1"
    built.store(tokens=torch.arange(32))
    assert len(backend.hot_cache) == 2
    assert backend.calculate_chunk_budget() == (2 << 20) // 36864
    assert [s["world_size"] for s in sharedseg.list_segments() if s["name"] == name] == [1]
    del backend
    LMCacheEngineBuilder.destroy("one")
    del built
    gc.collect()
    assert [s for s in sharedseg.list_segments() if s["name"] == name] == []


def test_read_at_after_close_raises():
    import gc
    import os

    from sharedseg import SharedSegmentError
    from sharedseg.lmcache import SharedSegMemoryAllocator
    allocator = SharedSegMemoryAllocator(2 << 20, pages="base", name=f"lmcache-rc-{os.getpid()}")
    assert allocator.read_at(4096, 16).numel() == 16
    allocator.close()
    with pytest.raises(SharedSegmentError, match=r"read_at: the allocator over segment "
                                                 r"'lmcache-rc-\d+-cpu' is closed"):
        allocator.read_at(4096, 16)
    del allocator
    gc.collect()


def test_importing_sharedseg_imports_no_engine():
    code = ("import sys, sharedseg; sys.exit(any(m in sys.modules for m in "
            "('vllm', 'sglang', 'lmcache', 'torch')))")
    assert subprocess.run([sys.executable, "-c", code], env=env_with_package()).returncode == 0


# LMCache's tier on a CUDA host, through the project's fake CUDA driver:
# torch here has no CUDA, so the script tells the adapter that it has
# (torch.cuda.is_available, after LMCache chose its own device).
PIN = '''
import logging, sys
import lmcache.v1.memory_allocators.mixed_memory_allocator
import torch
torch.cuda.is_available = lambda: True
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="log %(levelname)s %(message)s")
from sharedseg.lmcache import SharedSegMemoryAllocator
allocator = SharedSegMemoryAllocator(4 << 20, name="lmcache-pin")
info = allocator.segment.info
print("made", info["backend"], info["pinned"], info.get("registered_chunks", 0) > 0)
allocator.close()
'''


def pin_default(fake):
    from conftest import built
    env = env_with_package(SHAREDSEG_CUDA_LIBRARY=built("libsseg_fake_cuda.so",
                                                        "the fake CUDA driver"),
                           SSEG_FAKE_CUDA=fake)
    run = subprocess.run([sys.executable, "-c", PIN], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return [line for line in run.stdout.splitlines() if line.startswith(("made", "log INFO sh"))]


def test_the_pin_default_is_vmm_memory_where_the_probe_says_it_works():
    lines = pin_default("devices=2;numa=0,0")
    assert lines == ["log INFO sharedseg: pin auto is vmm: the cuda backend's VMM host memory "
                     "works here (the probe)", "made cuda True False"]


def test_the_pin_default_registers_where_vmm_host_memory_does_not_work():
    lines = pin_default("devices=2;numa=0,0;host_numa_vmm=0")
    assert lines[0].startswith("log INFO sharedseg: pin auto is host_register: VMM host memory "
                               "does not work here: ")
    assert lines[1:] == ["made memfd True True"]
