# SPDX-License-Identifier: Apache-2.0
"""One process: world_size 1, ranks as threads over a callable exchange,
views, dtypes, layouts, options and their errors."""
import gc
import warnings

import numpy as np
import pytest
import torch

import sharedseg
from sharedseg import SharedSegmentError, create_shared_segment
from thread_ranks import run_ranks

KV = {"k": dict(count=3, shape=(16, 64), dtype=torch.bfloat16),
      "v": dict(count=3, shape=(16, 8), dtype="float16")}


def mapped(addr):
    with open("/proc/self/maps") as f:
        return any(line.startswith(f"{addr:x}-") for line in f)


def test_world_size_1_needs_no_exchange():
    with create_shared_segment("py-single", KV, pages="base") as seg:
        assert seg.world_size == 1 and seg.is_owner and seg.owner_rank == 0
        ks = seg.tensors("k")
        assert len(ks) == 3 and ks[0].shape == (16, 64) and ks[0].dtype == torch.bfloat16
        assert seg.total_size() >= 3 * 16 * 64 * 2 + 3 * 16 * 8 * 2
        info = seg.info
        assert info["backend"] == "memfd" and info["pages"] == "base"
        assert info["page_size"] == 4096 and info["is_owner"]
        assert {"create_s", "complete_s", "populate_s", "numa_nodes", "pages_reason"} <= set(info)
        assert seg.device_addr() is None
        del ks


def test_bf16_and_fp16_views_share_bytes():
    with create_shared_segment("py-dtypes", KV, pages="base") as seg:
        k, v = seg.tensors("k"), seg.tensors("v")
        k[1].fill_(1.5)
        v[2].fill_(-2.0)
        assert v[2].dtype == torch.float16 and float(seg.tensors("v")[2][3, 3]) == -2.0
        bits = seg.arrays("k", dtype=np.uint16)[1]
        assert (bits == torch.tensor(1.5, dtype=torch.bfloat16).view(torch.int16).item()).all()
        assert seg.arrays("v")[2].dtype == np.float16 and (seg.arrays("v")[2] == -2.0).all()
        del k, v, bits


def test_arrays_are_zero_copy():
    blocks = {"x": dict(count=4, shape=(10, 10), dtype=np.float32)}
    with create_shared_segment("py-arrays", blocks, pages="base") as seg:
        base, size = seg.base_addr(), seg.total_size()
        xs = seg.arrays("x")
        for i, a in enumerate(xs):
            addr = a.__array_interface__["data"][0]
            assert base + seg.offsets("x")[i] == addr and addr + a.nbytes <= base + size
            a[:] = i
        assert [float(t.sum()) for t in seg.tensors("x")] == [0.0, 100.0, 200.0, 300.0]
        del xs


def test_dtype_spellings():
    blocks = {"a": (1, 4, "bf16"), "b": (1, (2, 2), np.dtype("int32")),
              "c": dict(count=2, shape=[3], dtype="torch.float64"), "d": (1, 1, torch.uint8)}
    with create_shared_segment("py-spell", blocks, pages="base") as seg:
        assert seg.blocks["a"]["dtype"] == "bfloat16" and seg.blocks["b"]["dtype"] == "int32"
        assert seg.tensors("c")[1].dtype == torch.float64 and seg.tensors("d")[0].numel() == 1


@pytest.mark.parametrize("layout", ["interleaved", "grouped"])
def test_layouts_come_from_the_c_library(layout):
    blocks = {"k": dict(count=3, shape=(1000,), dtype="float16"),
              "v": dict(count=2, shape=(300,), dtype="bfloat16")}
    with create_shared_segment(f"py-{layout}", blocks, layout=layout, align=1024,
                               pages="base") as seg:
        k, v = seg.offsets("k"), seg.offsets("v")
        assert f"order={layout}" in seg.describe() and "shape=float16[1000]" in seg.describe()
        assert all(o % 1024 == 0 for o in k + v)
        if layout == "grouped":
            assert max(k) < min(v)
        else:
            assert k[0] < v[0] < k[1] < v[1] < k[2]
        for i, t in enumerate(seg.tensors("k")):
            t.fill_(i)
        for i, t in enumerate(seg.tensors("v")):
            t.fill_(10 + i)
        assert [float(t[0]) for t in seg.tensors("k")] == [0.0, 1.0, 2.0]
        assert [float(t[-1]) for t in seg.tensors("v")] == [10.0, 11.0]


def test_segment_outlives_the_object_while_a_view_lives():
    seg = create_shared_segment("py-outlive", KV, pages="base")
    t, a = seg.tensors("k")[2], seg.arrays("v")[0]
    base = seg.base_addr()
    t.fill_(3.0)
    assert seg.close() is False  # views hold the pages
    with pytest.raises(SharedSegmentError, match="closed"):
        seg.tensors("k")
    del seg
    gc.collect()
    assert mapped(base) and float(t.sum()) == 3.0 * t.numel()
    del t
    gc.collect()
    assert mapped(base)  # the array still holds it
    del a
    gc.collect()
    assert not mapped(base)


def test_close_without_views_unmaps_and_context_manager_closes():
    with create_shared_segment("py-close", KV, pages="base") as seg:
        base = seg.base_addr()
        assert mapped(base)
    assert seg.closed and not mapped(base)
    assert seg.close() is True  # idempotent


def test_two_ranks_as_threads_over_a_callable_exchange():
    def make(r, gather):
        return create_shared_segment("py-threads", KV, world_size=2, rank_id=r, exchange=gather,
                                     pages="base", timeout=10)
    segs = run_ranks(2, make)
    assert all(isinstance(s, sharedseg.SharedSegment) for s in segs), segs
    assert segs[0].is_owner and not segs[1].is_owner and segs[1].owner_rank == 0
    assert segs[0].base_addr() != segs[1].base_addr()
    segs[1].tensors("k")[0].fill_(7.0)
    assert float(segs[0].tensors("k")[0][5, 5]) == 7.0
    for s in segs:
        s.close()


def test_a_callable_as_comm_group_and_readonly_peers():
    def make(r, gather):
        return create_shared_segment("py-ro", KV, world_size=2, rank_id=r, comm_group=gather,
                                     pages="base", readonly_peers=True)
    owner, peer = run_ranks(2, make)
    assert not owner.readonly and peer.readonly and peer.info["readonly"]
    owner.arrays("v")[1][:] = 4.0
    ro = peer.arrays("v")[1]
    assert not ro.flags.writeable and (ro == 4.0).all()
    assert peer.buffer().readonly and not owner.buffer().readonly
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "not writable" warning is expected and muted
        assert float(peer.tensors("v")[1][0, 0]) == 4.0
    del ro
    owner.close()
    peer.close()


def test_one_rank_failing_in_setup_fails_every_rank():
    def make(r, gather):
        return create_shared_segment("py-setup", KV, world_size=3, rank_id=r, exchange=gather,
                                     pages="bogus" if r == 2 else "base")
    errors = run_ranks(3, make)
    for e in errors:
        assert isinstance(e, SharedSegmentError), e
        assert "rank 2 failed in setup" in str(e) and "unknown pages 'bogus'" in str(e)
        assert set(e.failures) == {2}


def test_one_rank_failing_in_create_fails_every_rank():
    def make(r, gather):
        return create_shared_segment("py-create", KV, world_size=3, rank_id=r, exchange=gather,
                                     pages="base", host_register=(r == 1))
    errors = run_ranks(3, make)
    for e in errors:
        assert isinstance(e, SharedSegmentError), e
        assert str(e).startswith("segment 'py-create': rank 1 failed in create:"), str(e)
        assert "SSEG_F_HOST_REGISTER" in str(e)
        assert e.failures[1][0] == "create" and e.failures[0][0] == "complete"


def test_comm_group_and_tp_group_must_agree():
    def gather(mine):
        return [mine]
    with pytest.raises(ValueError, match="tp_group is an alias"):
        create_shared_segment("py-both", KV, world_size=1, comm_group=gather,
                              tp_group=lambda m: [m])
    with create_shared_segment("py-both", KV, world_size=1, comm_group=gather, tp_group=gather,
                               pages="base") as seg:
        assert seg.total_size() > 0


def test_world_size_above_1_without_a_group_says_what_to_pass():
    with pytest.raises(ValueError, match="comm_group"):
        create_shared_segment("py-nogroup", KV, world_size=2, rank_id=0)
    with pytest.raises(ValueError, match="rank_id=2"):
        create_shared_segment("py-nogroup", KV, world_size=2, rank_id=2, exchange=print)


@pytest.mark.parametrize("kwargs,needle", [
    (dict(mmap=False), "cuda"),
    (dict(host_register=True), "SSEG_F_HOST_REGISTER"),
    (dict(pages="hugetlb-3M"), "unknown pages"),
    (dict(numa="far"), "unknown numa"),
    (dict(populate="eager"), "unknown populate"),
    (dict(layout="diagonal"), "layout='diagonal'"),
    (dict(owner_rank=1), "owner_rank=1"),
    (dict(align=3000), "power of two"),
])
def test_refused_options_name_themselves(kwargs, needle):
    with pytest.raises(SharedSegmentError) as info:
        create_shared_segment("py-refused", KV, **kwargs)
    assert needle in str(info.value) and "rank 0 failed" in str(info.value)


def test_hugetlb_switch_asks_for_hugetlb_pages(knobs_steady):
    try:
        with create_shared_segment("py-hugetlb", KV, hugetlb=True) as seg:
            assert seg.info["pages"].startswith("hugetlb")
    except SharedSegmentError as e:  # no pool on this machine: the error says so
        assert "huge" in str(e).lower()


def test_size_without_blocks_and_buffer():
    with create_shared_segment("py-raw", size="1MiB", pages="base") as seg:
        assert seg.total_size() == 1 << 20
        mv = seg.buffer()
        mv[:4] = b"abcd"
        assert bytes(seg.buffer()[:4]) == b"abcd"
        with pytest.raises(KeyError, match="no block"):
            seg.tensors("k")
        mv.release()


def test_probe_and_supported():
    facts = sharedseg.probe()
    assert facts["schema"] == 1
    assert facts["memfd"] and facts["backends"]["memfd"]["available"]
    assert facts["auto"]["pages"] in ("base", "thp", "hugetlb-2M", "hugetlb-1G")
    assert sharedseg.supported() == (True, "")
    ok, why = sharedseg.supported("cuda")
    assert not ok and "cuda" in why
    with pytest.raises(ValueError, match="unknown backend"):
        sharedseg.supported("gpu")


def test_owner_per_host_from_gathered_identities():
    from sharedseg._protocol import _owner
    a, b = b"A" * sharedseg.HOST_ID_SIZE, b"B" * sharedseg.HOST_ID_SIZE
    ids = [a, a, b, b]
    assert [_owner(None, ids, 4, r, "auto") for r in range(4)] == [0, 0, 2, 2]
    # owner_rank picks the owner on its own host; the other host keeps its lowest rank.
    assert [_owner(1, ids, 4, r, "memfd") for r in range(4)] == [1, 1, 2, 2]
    assert [_owner(3, ids, 4, r, "auto") for r in range(4)] == [0, 0, 3, 3]
    # With the CUDA backend a fabric handle crosses hosts: owner_rank serves all.
    assert [_owner(1, ids, 4, r, "cuda") for r in range(4)] == [1, 1, 1, 1]
    assert [_owner(None, ids, 4, r, "cuda") for r in range(4)] == [0, 0, 2, 2]
    # So does an Ascend fabric handle (A3).
    assert [_owner(1, ids, 4, r, "ascend") for r in range(4)] == [1, 1, 1, 1]


def test_owner_rank_chooses_the_owner():
    def make(r, gather):
        return create_shared_segment("py-owner1", KV, world_size=3, rank_id=r, exchange=gather,
                                     owner_rank=1, pages="base")
    segs = run_ranks(3, make)
    assert [s.owner_rank for s in segs] == [1, 1, 1] and [s.is_owner for s in segs] == [
        False, True, False]
    for s in segs:
        s.close()


@pytest.mark.parametrize("view", ["tensor", "memoryview"])
def test_the_last_view_dropped_while_an_exception_propagates(view):
    """Releasing the segment runs Python (the quiesce hook, the log sink)
    while the frame that held the last view unwinds with its exception set:
    that exception must come out unchanged."""
    seg = create_shared_segment("py-unwind", KV, pages="base")
    calls = []
    seg._native.set_quiesce(lambda: calls.append("quiesce"))
    holder = [seg.tensors("k")[0] if view == "tensor" else seg.buffer()]
    base = seg.base_addr()
    assert seg.close() is False
    del seg

    # The view is only on the evaluation stack when 1 // 0 raises: it is
    # released while the ZeroDivisionError is set.
    with pytest.raises(ZeroDivisionError) as info:
        (holder.pop(), 1 // 0)
    assert info.value.__context__ is None and info.value.__cause__ is None
    gc.collect()
    assert calls == ["quiesce"] and not mapped(base)
