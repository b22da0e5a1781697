# SPDX-License-Identifier: Apache-2.0
"""vLLM's own tests of its shared region (tests/v1/kv_offload/cpu/
test_shared_offload_region.py and test_canonical_layout.py in the sdists
of 0.32 and 0.33), rewritten for SharedSegRegion: the same behaviours,
checked on our region, on both releases' legs. Each test names the vLLM
tests it stands for; those only 0.33 has check on 0.32 that its pin has
no worker_slot_only, the one thing they need.

Differences by design, not ported:
- no /dev/shm file: vLLM's tests of the creator and joiner flags, the
  file's existence, size and unlinking, _wait_for_file_size, and ftruncate
  or mmap failures. Our region is one segment that the group makes in one
  collective (the library's exchange), not a file that the first opener
  creates and the rest wait for; what stands for them here is one owner
  rank, one listed segment and its size.
- one collective instead of a file and a barrier: vLLM's barrier, race and
  barrier-failure tests (threads or processes racing for O_EXCL, peers
  released on failure). The library's own suite tests that a rank that
  fails fails every rank (test_vllm.py: too big, ranks that disagree).
- population in C: vLLM's MADV_POPULATE_WRITE and per-page fallback tests;
  the library populates (test_vllm.py checks the pages resident).
- a shared region on CPU too: vLLM builds its region on CUDA and XPU only
  (_uses_shared_region); ours is the segment on vLLM's CPU platform as well,
  so these run here, where vLLM's CUDA-only canonical round trip cannot:
  its transfer through CUDA handlers is replaced by writes to the views.
- 0.33's populate_shard (each rank pre-faults its share of the file) and
  its segmented region (several files under one mapping, because the
  kernel serialises page-cache inserts per file): population in C, and one
  segment; the library's populate modes stand for them
  (test_populate_shard_prefaults_only_its_share,
  test_segmented_region_maps_files_back_to_back, and the populate half of
  test_pin_mmap_region_worker_slot_only_registers_own_slots).
- 0.33's test_host_registration_reuses_cudart tests vLLM's host_register
  module, not the region.
- where sharedseg pinned the segment, total_size_bytes is 0, so vLLM's
  pin_mmap_region registers nothing (test_vllm_pin.py); these tests use an
  unpinned region, which vLLM's pin registers as it registers its own."""
import contextlib
import mmap

import pytest

from sharedseg.vllm import ENGINE
from test_vllm_contract import our_region

pytestmark = pytest.mark.engine

PAGE = mmap.PAGESIZE
_UNREGISTER = "vllm.v1.kv_offload.cpu.host_register.host_unregister"


@contextlib.contextmanager
def region(num_chunks=4, slot_bytes=PAGE, workers=1, slot=0):
    """Our region of one rank, holding the row of `workers` slots."""
    r = our_region(num_chunks, workers * slot_bytes, slot, slot_bytes)
    try:
        yield r
    finally:
        r.cleanup()


def raw(r):
    """The segment's bytes, as vLLM's tests read its mmap."""
    return bytes(r.segment.buffer())


def test_worker_view_shape_and_row_stride():
    """vLLM: test_create_next_worker_view_shape_and_stride,
    ..._row_stride_with_multiple_workers."""
    with region(num_chunks=4, slot_bytes=2 * PAGE) as r:
        t = r.create_next_worker_view(PAGE)
        assert t.shape == (4, PAGE) and t.stride() == (2 * PAGE, 1)
    with region(num_chunks=2, workers=4) as r:
        assert r.create_next_worker_view(PAGE).stride(0) == 4 * PAGE


@pytest.mark.parametrize("slot", [0, 1])
def test_worker_view_starts_at_its_slot(slot):
    """vLLM: test_create_next_worker_view_storage_offset_rank0, ..._rank1."""
    with region(workers=2, slot=slot) as r:
        t = r.create_next_worker_view(PAGE)
        assert t.data_ptr() == r._base.data_ptr() + slot * PAGE


def test_cursor_advances_to_exactly_the_slots_end():
    """vLLM: test_create_next_worker_view_cursor_advances, ..._exact_fill_succeeds."""
    with region(slot_bytes=3 * PAGE) as r:
        assert r._worker_offset == 0
        for n in (1, 2, 3):
            r.create_next_worker_view(PAGE)
            assert r._worker_offset == n * PAGE


def test_overflow_raises_and_leaves_the_cursor():
    """vLLM: test_create_next_worker_view_single_overflow_raises,
    ..._cumulative_overflow_raises, ..._overflow_does_not_mutate_cursor."""
    with region() as r:
        with pytest.raises(AssertionError, match="exceeds worker area end"):
            r.create_next_worker_view(PAGE + 1)
        assert r._worker_offset == 0
    with region(slot_bytes=2 * PAGE) as r:
        r.create_next_worker_view(PAGE)
        r.create_next_worker_view(PAGE)
        with pytest.raises(AssertionError, match="exceeds worker area end"):
            r.create_next_worker_view(1)
        assert r._worker_offset == 2 * PAGE


def test_writes_land_at_their_offsets_in_the_segment():
    """vLLM: test_create_next_worker_view_write_visible_in_raw_mmap,
    ..._multi_tensor_layout (the segment's buffer for vLLM's mmap)."""
    with region(num_chunks=4) as r:
        r.create_next_worker_view(PAGE)[2, :] = 42
        assert raw(r)[2 * PAGE:3 * PAGE] == bytes([42]) * PAGE
        assert raw(r)[:2 * PAGE] + raw(r)[3 * PAGE:] == bytes(3 * PAGE)
    with region(num_chunks=2, slot_bytes=2 * PAGE) as r:
        first, second = r.create_next_worker_view(PAGE), r.create_next_worker_view(PAGE)
        first.fill_(1)
        second.fill_(2)
        assert raw(r) == (bytes([1]) * PAGE + bytes([2]) * PAGE) * 2


def test_segment_is_the_regions_size():
    """vLLM: test_file_has_correct_size (the segment for the file)."""
    with region(num_chunks=4, workers=2) as r:
        assert r.segment.total_size() == r.total_size_bytes == 4 * 2 * PAGE


def test_cleanup_twice_is_a_no_op():
    """vLLM: test_cleanup_idempotent."""
    with region() as r:
        r.cleanup()


def test_cleanup_releases_the_mapping_after_views():
    """vLLM: test_cleanup_after_create_next_worker_view_releases_mmap,
    test_cleanup_creator_all_effects (the segment closed for the mmap
    closed; no fd, no file)."""
    with region() as r:
        r.create_next_worker_view(PAGE)
        r.cleanup()
        assert r.segment.closed and r._views == []
        with pytest.raises(RuntimeError, match="released"):
            r.base_tensor


@pytest.fixture
def host_calls(monkeypatch):
    """vLLM's host_register in its worker, and the host_unregister vLLM's
    worker and our cleanup call, replaced by recorders; registrations capped
    at seven pages (vLLM's fixture host_register)."""
    from vllm.v1.kv_offload.cpu import gpu_worker

    import sharedseg.vllm as adapter
    calls = dict(register=[], unregister=[], fail_at=None)

    def register(address, size):
        calls["register"].append((address, size))
        return len(calls["register"]) - 1 != calls["fail_at"]

    monkeypatch.setattr(gpu_worker, "MAX_HOST_REGISTER_CHUNK_BYTES", 7 * PAGE)
    if slot_pin():
        monkeypatch.setattr(gpu_worker, "MIN_HOST_REGISTER_SAVED_BYTES", PAGE)
    monkeypatch.setattr(gpu_worker, "host_register", register)
    monkeypatch.setattr(gpu_worker, "host_unregister", calls["unregister"].append)
    assert _UNREGISTER in adapter.ENGINE._found  # a name the adapter looks up
    monkeypatch.setitem(adapter.ENGINE._found, _UNREGISTER, calls["unregister"].append)
    return calls


def test_cleanup_unregisters_every_pinned_chunk(host_calls):
    """vLLM: test_cleanup_unregisters_every_pinned_chunk."""
    with region() as r:
        r.pinned_addresses = [0x100000, 0x200000, 0x300000]
        r.is_pinned = True
    assert host_calls["unregister"] == [0x300000, 0x200000, 0x100000]


def slot_pin():
    """Whether this vLLM's pin_mmap_region has worker_slot_only (0.33's:
    only this rank's slot of every row where that saves enough)."""
    import inspect

    from vllm.v1.kv_offload.cpu import gpu_worker
    return "worker_slot_only" in inspect.signature(gpu_worker.pin_mmap_region).parameters


def pin(r, **kwargs):
    from vllm.v1.kv_offload.cpu import gpu_worker
    gpu_worker.pin_mmap_region(r, **kwargs)


@pytest.mark.parametrize("worker_slot_only", [False, True])
def test_vllms_pin_registers_row_aligned_chunks(host_calls, worker_slot_only):
    """vLLM: test_pin_mmap_region_registers_row_aligned_chunks: 3-page rows
    under a 7-page cap register as 6 + 6 + 3 pages, undone in reverse; on
    0.33 a slot spanning the whole row too (worker_slot_only)."""
    if worker_slot_only and not slot_pin():
        assert ENGINE.release() == "0.32"  # 0.33 has it
        return
    with region(num_chunks=5, slot_bytes=3 * PAGE) as r:
        pin(r, **(dict(worker_slot_only=True) if worker_slot_only else {}))
        base = r._base.data_ptr()
        assert host_calls["register"] == [(base, 6 * PAGE), (base + 6 * PAGE, 6 * PAGE),
                                          (base + 12 * PAGE, 3 * PAGE)]
        assert r.is_pinned
    assert host_calls["unregister"] == [base + 12 * PAGE, base + 6 * PAGE, base]


@pytest.mark.parametrize("fail_at", [0, 1, 2])
def test_vllms_pin_failing_leaves_the_region_pageable(host_calls, fail_at):
    """vLLM: test_pin_mmap_region_failure_leaves_region_pageable,
    ..._when_host_register_unsupported_stays_pageable (fail_at 0)."""
    from vllm.v1.kv_offload.cpu import gpu_worker
    host_calls["fail_at"] = fail_at
    with region(num_chunks=5, slot_bytes=3 * PAGE) as r:
        gpu_worker.pin_mmap_region(r)
        base = r._base.data_ptr()
        assert not r.is_pinned and r.pinned_addresses == []
    registered = [base + i * 6 * PAGE for i in range(fail_at)]
    assert [a for a, _ in host_calls["register"]] == registered + [base + fail_at * 6 * PAGE]
    assert host_calls["unregister"] == registered[::-1]  # vLLM's rollback; cleanup adds none


def test_vllms_slot_pin_registers_only_this_ranks_slots(host_calls):
    """vLLM 0.33: test_pin_mmap_region_worker_slot_only_registers_own_slots:
    rank 1's 1.5-page slot in 4-page rows registers pages [1, 3) of each
    row (our iter_worker_slot_ranges is vLLM's on an unpinned segment)."""
    if not slot_pin():
        assert ENGINE.release() == "0.32"
        return
    r = our_region(3, 4 * PAGE, 1, PAGE + PAGE // 2)
    try:
        pin(r, worker_slot_only=True)
        base = r._base.data_ptr() + PAGE
        assert host_calls["register"] == [(base + row * 4 * PAGE, 2 * PAGE) for row in range(3)]
        assert r.is_pinned
    finally:
        r.cleanup()
    assert host_calls["unregister"] == [base + row * 4 * PAGE for row in (2, 1, 0)]


def unmapped_region(num_chunks, slot_bytes, workers):
    """vLLM 0.33's _unmapped_registration_region, as ours: a large region
    described without a segment (registration is recorded), unpinned."""
    from types import SimpleNamespace

    from sharedseg.vllm import SharedSegRegion
    r = object.__new__(SharedSegRegion)
    vars(r).update(rank=1, num_chunks=num_chunks, page_size=PAGE, cpu_page_size=slot_bytes,
                   _row_stride=workers * slot_bytes, total_size_bytes=num_chunks * workers *
                   slot_bytes, _segments=[], _base=SimpleNamespace(data_ptr=lambda: 0x100000),
                   pinned_addresses=[], is_pinned=False,
                   segment=SimpleNamespace(info=dict(pinned=False)))
    return r


@pytest.mark.parametrize("rows,slot_mib,own_slots",
                         [(2, 2, False), (2, 3, True), ((1 << 16) + 1, 3, True)])
def test_vllms_slot_pin_chooses_by_savings_not_rows(monkeypatch, rows, slot_mib, own_slots):
    """vLLM 0.33: test_pin_mmap_region_selects_by_savings_not_row_count:
    small savings give one whole-region call, many rows still give slots."""
    if not slot_pin():
        assert ENGINE.release() == "0.32"
        return
    from vllm.v1.kv_offload.cpu import gpu_worker
    slot = slot_mib << 20
    r = unmapped_region(rows, slot, 2)
    calls = []
    monkeypatch.setattr(gpu_worker, "host_register", lambda a, n: calls.append((a, n)) or True)
    pin(r, worker_slot_only=True)
    assert r.is_pinned
    assert calls == ([(0x100000 + (2 * row + 1) * slot, slot) for row in range(rows)]
                     if own_slots else [(0x100000, r.total_size_bytes)])


def test_cleanup_keeps_the_mapping_while_a_buffer_is_exported():
    """vLLM 0.33: test_cleanup_keeps_region_mapped_while_buffers_are_exported:
    a native user's export of the buffer (a NIC's registration) keeps the
    pages mapped through cleanup(); the segment itself is closed."""
    import ctypes
    with region() as r:
        r.create_next_worker_view(PAGE)[0, :1] = 7
        export = ctypes.c_char.from_buffer(r.segment.buffer())
        r.cleanup()
        assert r.segment.closed
        assert ctypes.string_at(ctypes.addressof(export), 1) == b"\x07", "still mapped"
        del export


@pytest.mark.parametrize("world", [2, 4])
def test_ranks_share_one_segment_in_their_own_slots(vllm_group_run, world):
    """vLLM: test_create_next_worker_view_multiprocess_slots, ..._worker_isolation,
    test_multi_worker_race_exactly_one_creator, ..._shared_memory_visible,
    test_cleanup_non_creator_all_effects, test_cleanup_creator_all_effects;
    test_cross_topology_roundtrip at writer tp = reader tp (canonical).
    Over vLLM's TP group on gloo: one owner for vLLM's one creator, and the
    segment gone with the last rank's cleanup for the file's unlink."""
    per_rank = vllm_group_run(world)
    assert sum(r["slots"]["owner"] for r in per_rank) == 1
    for rank, seen in enumerate(per_rank):
        s = seen["slots"]
        assert s["listed"] == [world] and s["every_slot"] and s["offset"] == rank * PAGE, s
        assert s["left"] == []
        c = seen["canonical"]
        assert c["assembled"], c
        assert c["facts"] == [[[4, PAGE // 2], [PAGE, 1], 0], [[4, PAGE // 2], [PAGE, 1], PAGE // 2]]
    assert per_rank[0]["slots"]["kept"] and per_rank[0]["slots"]["listed_after_peers"] == [1]
