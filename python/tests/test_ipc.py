# SPDX-License-Identifier: Apache-2.0
"""Segment views and torch's own sharing: torch.multiprocessing refuses to
send a view (it would copy it out of the segment), share_memory_() on a
view is a no-op (its pages are shared memory already), other tensors are
untouched."""
import multiprocessing

import pytest
import torch
import torch.multiprocessing as tmp
from multiprocessing.reduction import ForkingPickler

from sharedseg import SharedSegmentError, create_shared_segment
from sharedseg._ipc import segment_of

KV = {"k": dict(count=2, shape=(16, 8), dtype=torch.float32)}


def test_share_memory_keeps_a_view_on_the_segment():
    with create_shared_segment("py-ipc-share", KV, pages="base") as seg:
        k = seg.tensors("k")
        ptrs = [t.data_ptr() for t in k]
        for t in k:
            assert t.share_memory_() is t
        k[0][2:4].share_memory_()  # a view of a view: the same storage
        assert [t.data_ptr() for t in k] == ptrs
        k[1].fill_(3.0)
        assert float(seg.tensors("k")[1].sum()) == 3.0 * 128  # still the segment's bytes
        plain = torch.zeros(4)
        assert plain.share_memory_().is_shared()  # other tensors: torch's own path
        del k


def test_torch_multiprocessing_refuses_to_send_a_view():
    with create_shared_segment("py-ipc-send", KV, pages="base") as seg:
        k = seg.tensors("k")
        assert segment_of(k[0]) == "/memfd:sseg:py-ipc-send"
        assert segment_of(torch.zeros(3)) is None
        with pytest.raises(SharedSegmentError, match="view of sharedseg segment 'py-ipc-send'"):
            ForkingPickler.dumps(k[0])
        queue = tmp.get_context("spawn").SimpleQueue()
        with pytest.raises(SharedSegmentError, match="send it the block name and entry index"):
            queue.put(k[1])
        ForkingPickler.dumps(torch.zeros(3))  # other tensors go through
        del k


def test_the_supported_way_is_name_block_and_offsets():
    """What the error points to: a process that joins the group finds the
    same entry by block name and index (or offset)."""
    from thread_ranks import run_ranks

    def make(r, gather):
        return create_shared_segment("py-ipc-join", KV, world_size=2, rank_id=r,
                                     exchange=gather, pages="base")
    owner, joined = run_ranks(2, make)
    owner.tensors("k")[1].fill_(7.0)
    assert owner.offsets("k") == joined.offsets("k")
    assert float(joined.tensors("k")[1][0, 0]) == 7.0
    owner.close()
    joined.close()


def test_spawn_arguments_cannot_carry_a_view():
    with create_shared_segment("py-ipc-spawn", KV, pages="base") as seg:
        k = seg.tensors("k")
        ctx = multiprocessing.get_context("spawn")
        proc = ctx.Process(target=print, args=(k[0],))
        with pytest.raises(SharedSegmentError, match="view of sharedseg segment"):
            proc.start()
        del k, proc
