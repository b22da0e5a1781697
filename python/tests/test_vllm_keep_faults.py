# SPDX-License-Identifier: Apache-2.0
"""The kept vLLM tier under faults (the fourth hardening round): a
scheduler that cannot reach the keeper stores nothing, so the next engine
never serves another block's bytes; an index that cannot be read is
discarded with one sentence, every time, never a crash; the tier lock
belongs to an open file, not a process; an engine of another configuration
is refused while the first one runs, and the first one's tier is kept.
Over a real keeper (`sharedseg keep`) and vLLM's own manager."""
import os
import signal
import struct
import subprocess
import sys

import pytest

from conftest import env_with_package, start_keeper
from test_vllm_keep import CHUNKS, ROW, _looked_up, _manager, _tier_segment, stop

pytestmark = pytest.mark.engine


def _keys(n):
    from vllm.v1.kv_offload.base import make_offload_key
    return [make_offload_key(bytes([i]) * 32, 0) for i in range(n)]


def _store(manager, keys, rc):
    """A store as vLLM's scheduler drives it: prepared, then completed;
    the chunks it was given (None where the manager stores nothing)."""
    out = manager.prepare_store(keys, rc)
    if out is None:
        return None
    chunks = [manager._policy.get(k).chunk_id for k in out.keys_to_store]
    manager.complete_store(keys, rc)
    return chunks


def _engine_a_stores(name_k, name, key):
    """Engine A: its workers' segment on the tier, its scheduler's manager,
    and the chunk where it stored key."""
    from vllm.v1.kv_offload.base import ReqContext
    seg = _tier_segment(name_k, name, engine="a")
    a = _manager(name_k, name, engine="a")
    rc = ReqContext(req_id="a")
    a.on_new_request(rc)
    [chunk] = _store(a, [key], rc)
    return seg, a, chunk


def _chunk_bytes(seg, chunk):
    return bytes(seg.buffer()[chunk * ROW:chunk * ROW + 8])


def test_a_scheduler_that_cannot_reach_the_keeper_stores_nothing(caplog):
    """Engine A stores k0 and goes. Engine B's workers take the kept tier,
    but B's scheduler cannot ask the keeper (it is stopped): B stores
    nothing, and says so, where before it stored k1 into k0's chunk, still
    listed, and the next engine served k0 with k1's bytes. Once the keeper
    answers, B serves A's k0, and engine C still finds k0's own bytes."""
    from vllm.v1.kv_offload.base import ReqContext

    from sharedseg.vllm_keep import segment_name
    k0, k1 = _keys(2)
    name_k = f"vf-{os.getpid()}"
    name = segment_name(name_k)
    p = start_keeper(name_k)
    try:
        seg, a, chunk = _engine_a_stores(name_k, name, k0)
        seg.buffer()[chunk * ROW:chunk * ROW + 8] = b"k0-bytes"  # A's worker wrote them
        a.close()
        seg.close()

        seg_b = _tier_segment(name_k, name, engine="b")  # B's workers: the kept tier
        assert _chunk_bytes(seg_b, chunk) == b"k0-bytes"
        os.kill(p.pid, signal.SIGSTOP)  # the keeper cannot answer
        try:
            b = _manager(name_k, name, engine="b")
            rc = ReqContext(req_id="b")
            with caplog.at_level("WARNING", logger="vllm.kv_offload.sharedseg"):
                b.on_new_request(rc)
                assert b.prepare_store([k1], rc) is None  # nothing lands in k0's chunk
                assert _looked_up(b, [k0]) == ["MISS"]
        finally:
            os.kill(p.pid, signal.SIGCONT)
        assert (f"keeper '{name_k}' could not be asked for its index" in caplog.text and
                "this engine stores nothing in the tier until it can" in caplog.text)
        b.RETRY_S = 0.0
        b._retry_at = 0.0  # asked again now, as after RETRY_S
        assert _looked_up(b, [k0]) == ["HIT"]  # A's, restored from the index
        b.close()
        seg_b.close()

        seg_c = _tier_segment(name_k, name, engine="c")
        c = _manager(name_k, name, engine="c")
        assert _looked_up(c, [k0, k1]) == ["HIT", "MISS"]
        assert _chunk_bytes(seg_c, chunk) == b"k0-bytes"
        c.close()
        seg_c.close()
    finally:
        stop(p)


# ---- an index that cannot be read ----

def _corrupt(index, how):
    """One way an index a buggy process of the same user left is broken."""
    from sharedseg.engines.vllm.keep import _DESC_AT, _HEAD, FORMAT, KEY_MAX, MAGIC

    def desc(text):
        index.buf[_DESC_AT:_DESC_AT + len(text)] = text
        _HEAD.pack_into(index.buf, 0, MAGIC, FORMAT, index.num_chunks, KEY_MAX, len(text))

    if how == "not an object":
        desc(b"[1, 2]")
    elif how == "nested deeply":
        desc(b"[" * 2000 + b"]" * 2000)
    elif how == "truncated":
        desc(b'{"model": "m"')
    elif how == "not UTF-8":
        desc(b'{"model": "\xff\xfe"}')
    elif how == "a huge length":
        _HEAD.pack_into(index.buf, 0, MAGIC, FORMAT, index.num_chunks, KEY_MAX, 1 << 31)
    elif how == "another format":
        _HEAD.pack_into(index.buf, 0, MAGIC, FORMAT + 7, index.num_chunks, KEY_MAX, 2)
    else:
        raise AssertionError(how)


UNREADABLE = {
    "not an object": "its description is a JSON list, not an object",
    "nested deeply": "its description is no JSON (RecursionError",
    "truncated": "its description is no JSON (JSONDecodeError",
    "not UTF-8": "its description is no JSON (UnicodeDecodeError",
    "a huge length": "a description of 2147483648 bytes (at most 4032)",
    "another format": "another format (magic b'SSEGVKV1', format 9",
}


@pytest.mark.parametrize("how", sorted(UNREADABLE))
def test_an_index_that_cannot_be_read_is_discarded_with_one_sentence(caplog, how):
    """Each restart reads it: the manager says once that it was unreadable,
    discards it, and serves; the restart after finds a good index. Before,
    these raised TypeError, AttributeError, RecursionError or struct.error
    at every restart, or were called "held no index"."""
    from vllm.v1.kv_offload.base import ReqContext

    from sharedseg.engines.vllm.rows import region_index_offset
    from sharedseg.vllm_keep import TierIndex, index_bytes, segment_name
    k0, = _keys(1)
    name_k = f"vc-{os.getpid()}"
    name = segment_name(name_k)
    p = start_keeper(name_k)
    try:
        seg = _tier_segment(name_k, name)
        at = region_index_offset(CHUNKS, ROW, index_bytes(CHUNKS))
        _corrupt(TierIndex(seg.buffer()[at:at + index_bytes(CHUNKS)], CHUNKS), how)
        seg.close()
        m = _manager(name_k, name)
        rc = ReqContext(req_id="m")
        with caplog.at_level("WARNING", logger="vllm.kv_offload.sharedseg"):
            m.on_new_request(rc)
        said = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
        assert len(said) == 1 and UNREADABLE[how] in said[0], caplog.text
        assert said[0].endswith("its blocks are discarded")
        assert _store(m, [k0], rc) is not None and _looked_up(m, [k0]) == ["HIT"]
        m.close()
        caplog.clear()
        m = _manager(name_k, name)
        assert _looked_up(m, [k0]) == ["HIT"] and "cannot be read" not in caplog.text
        m.close()
    finally:
        stop(p)


def test_sequence_numbers_wrap_instead_of_raising():
    from sharedseg.vllm_keep import ENTRY, INDEX_HEADER, TierIndex, index_bytes
    index = TierIndex(memoryview(bytearray(index_bytes(2))), 2)
    index.start({})
    for seq in ((1 << 64) - 2, (1 << 64) - 1):  # even, and odd (a write cut short)
        struct.pack_into("<Q", index.buf, INDEX_HEADER + ENTRY, seq)
        index.list(1, b"k" * 36)
        assert list(index.listed()) == [(1, b"k" * 36)]
        assert struct.unpack_from("<Q", index.buf, INDEX_HEADER + ENTRY)[0] == 0


# ---- the tier lock, and another engine ----

HOLDER = """
import sys
from vllm.v1.kv_offload.base import ReqContext
from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager
from sharedseg.vllm_keep import KeptOffloadingManager
m = KeptOffloadingManager.adopt(CPUOffloadingManager(num_chunks=%d, cache_policy="lru"),
                                keeper=sys.argv[1], name=sys.argv[2], row_stride=%d,
                                desc=lambda: {"model": "m"}, engine_id="e")
try:
    m.on_new_request(ReqContext(req_id="third"))
    print("attached", flush=True)
except RuntimeError as e:
    print("refused:", e, flush=True)
""" % (CHUNKS, ROW)


def test_the_tier_lock_belongs_to_an_open_file_not_to_a_process():
    """Two kept managers in one process: the second is refused; closing it
    leaves the first's lock, so a third process is refused too (with a
    per-process lock the second attached, and its close let the third
    in)."""
    from sharedseg.vllm_keep import segment_name
    name_k = f"vl-{os.getpid()}"
    name = segment_name(name_k)
    p = start_keeper(name_k)
    try:
        seg = _tier_segment(name_k, name)  # the workers' group, alive
        first, second = _manager(name_k, name), _manager(name_k, name)
        assert _looked_up(first, [b"k" * 36]) == ["MISS"]
        with pytest.raises(RuntimeError, match=f"another engine serves from tier '{name}'"):
            _looked_up(second, [b"k" * 36])
        second.close()
        third = subprocess.run([sys.executable, "-c", HOLDER, name_k, name],
                               env=env_with_package(), capture_output=True, text=True,
                               timeout=120)
        assert third.stdout.startswith("refused: sharedseg keep: another engine serves"), \
            third.stdout + third.stderr
        first.close()
        third = subprocess.run([sys.executable, "-c", HOLDER, name_k, name],
                               env=env_with_package(), capture_output=True, text=True,
                               timeout=120)
        assert third.stdout == "attached\n", third.stdout + third.stderr
        seg.close()
    finally:
        stop(p)


def test_an_engine_of_another_configuration_is_refused_while_the_first_runs(caplog):
    """Engine A runs on the kept tier (its workers map it, its scheduler
    writes its index). Engine B names the same keeper with a larger tier:
    B's workers get new memory that no one keeps, and say why (before, the
    keeper freed A's tier for it); B's scheduler is refused at every
    request; A's tier is kept, and the engine after A finds what A stored."""
    from sharedseg.vllm_keep import segment_name
    k0, = _keys(1)
    name_k = f"vo-{os.getpid()}"
    name = segment_name(name_k)
    p = start_keeper(name_k)
    try:
        seg_a, a, _ = _engine_a_stores(name_k, name, k0)
        with caplog.at_level("WARNING", logger="sharedseg"):
            seg_b = _tier_segment(name_k, name, engine="b", chunks=2 * CHUNKS)
        assert "holds one of this name that a live group maps now (size: kept" in caplog.text
        assert not seg_b.info["kept"]
        b = _manager(name_k, name, engine="b")
        for _ in range(2):
            with pytest.raises(RuntimeError, match=f"another engine serves from tier '{name}'"):
                _looked_up(b, [k0])
        b.close()
        seg_b.close()
        a.close()
        seg_a.close()
        seg_c = _tier_segment(name_k, name, engine="c")
        assert seg_c.info["kept"]
        c = _manager(name_k, name, engine="c")
        assert _looked_up(c, [k0]) == ["HIT"]
        c.close()
        seg_c.close()
    finally:
        err = stop(p)
    assert "freed" not in err
