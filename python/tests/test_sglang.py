# SPDX-License-Identifier: Apache-2.0
"""sharedseg.sglang against the real SGLang (0.5.23, pinned by
tools/install-deps.sh): SGLang's MLATokenToKVPoolHost built on CPU over 2
and 4 gloo ranks (SGLang's own GroupCoordinator) with our allocator
installed, in its layer_first, page_first and page_first_direct layouts;
the install's version check and its undoing. SGLang's engine itself cannot
run here (its HiCache copies are CUDA kernels): sglang_ranks.py moves
device<->host through torch stand-ins for them and says so."""
import pytest

from conftest import run_rank_script

pytestmark = pytest.mark.engine


LAYOUTS = ("layer_first", "page_first", "page_first_direct")


def run_ranks(tmp_path, scenarios, world):
    return run_rank_script(tmp_path, "sglang_ranks.py", scenarios, world)


def test_the_tested_sglang_is_installed():
    import sglang
    assert sglang.__version__ == "0.5.23"


@pytest.mark.parametrize("world", [2, 4])
def test_mla_host_pool_is_one_segment_for_the_group(tmp_path, world):
    """Then, on 2 ranks, a group that disagrees on the pool's shape gets the
    library's agreed error on every rank, never a hang."""
    per_rank = run_ranks(tmp_path, ",".join(LAYOUTS + (("disagree",) if world == 2 else ())),
                         world)
    for layout in LAYOUTS:
        check_layout([r[layout] for r in per_rank], layout, world)
    for s in (r.get("disagree") for r in per_rank if world == 2):
        assert s["is_sharedseg"], s
        assert "block 'pool': rank 1 declared shape=bfloat16[2,784,1,576], rank 0 declared " \
               "shape=bfloat16[2,528,1,576]" in s["error"]


def check_layout(seen, layout, world):
    for s in seen:
        # One pool, one segment holding it whole, mapped by every rank: one
        # copy of the host pool for the group, not one per rank.
        assert s["allocators"] == 1 and s["segments"] == 1 and s["inside"]
        assert s["segment_size"] == s["pool_bytes"]
        assert s["listed"] == [dict(world_size=world, processes=world)]
        # alloc agrees across ranks; a page rank 0 set is every rank's.
        assert s["indices"] == seen[0]["indices"] and len(s["indices"]) == 32
        assert s["page_from_rank0"] is True
        if layout != "page_first":
            assert s["loaded_rank0_rows"] is True
        assert s["left"] == [] and s["uninstalled"] is True


def test_install_replaces_sglangs_allocator_choice_and_uninstall_puts_it_back():
    import importlib

    import sharedseg.sglang as adapter
    own = {m: importlib.import_module(m).get_allocator_from_storage
           for m in adapter.USERS}
    made = []
    adapter.install(lambda: made.append("ours") or "ours")
    try:
        from sglang.srt.mem_cache.pool_host import base, common
        assert base.get_allocator_from_storage("default") == "ours"
        assert type(base.get_allocator_from_storage("shm")).__name__ == "ShmHostTensorAllocator"
        assert common.get_allocator_from_storage("default") == "ours"
        assert adapter.installed()
    finally:
        adapter.uninstall()
    assert {m: importlib.import_module(m).get_allocator_from_storage
            for m in adapter.USERS} == own
    assert not adapter.installed()


def test_another_sglang_fails_with_a_sentence(monkeypatch):
    import sglang

    import sharedseg.sglang as adapter
    monkeypatch.setattr(sglang, "__version__", "0.5.9")
    with pytest.raises(RuntimeError, match=r"supports SGLang 0\.5\.23; this is SGLang 0\.5\.9"):
        adapter.install()
    monkeypatch.setattr(sglang, "__version__", "0.5.23")
    monkeypatch.setattr(adapter, "USERS", adapter.USERS + ("sglang.srt.mem_cache.pool_host.mla",))
    with pytest.raises(RuntimeError, match="pool_host.mla.get_allocator_from_storage"):
        adapter.check_version()
    assert not adapter.installed()


def test_the_allocator_refuses_device_memory():
    import sharedseg.sglang as adapter
    with pytest.raises(ValueError, match="allocates host memory; got device='cuda'"):
        adapter.SharedSegHostTensorAllocator(group=object()).allocate((4,), "float32", "cuda")


def test_the_documented_lines_install_it():
    """docs/integrations.md's two lines, run as written."""
    import sharedseg.sglang as adapter
    from conftest import doc_block
    exec(doc_block("python/tests/test_sglang.py"), {})
    try:
        assert adapter.installed()
        from sglang.srt.mem_cache.pool_host import base
        assert getattr(base.get_allocator_from_storage, "sharedseg", False)
    finally:
        adapter.uninstall()
