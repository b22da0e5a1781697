# SPDX-License-Identifier: Apache-2.0
"""A vLLM host KV tier that outlives its engine ("sharedseg": {"keep": NAME}).

The tier's segment is left with the keeper NAME (`sharedseg keep --name
NAME`), which holds it between engines; the next engine of the same
declaration maps what its predecessor wrote (spec.py's region). What
vLLM's scheduler knows of the tier (which block hash sits in which chunk)
lives in the scheduler's memory; here it lives in the segment too, in an
index block after the chunks, which the scheduler maps through the keeper
(sseg_keeper_lend): no rank of the group is the scheduler.

The index, at the index block's offset:
    header (INDEX_HEADER bytes): magic, format, num_chunks, key bytes, the
        length of the description; the claim (a hash of the engine id of
        the engine whose workers map the segment now, written by the
        group's owner when it creates the region); then the description:
        JSON of every part of the configuration that gives a block hash and
        its bytes their meaning (the model, its dtype, block sizes, layers,
        the TP layout, NONE_HASH);
    then one ENTRY-byte entry per chunk, in chunk order: a sequence number,
        the key's length, the key (vLLM's OffloadKey: block hash and group).
An entry lists its chunk only while its sequence number is even and its
key length is not 0. The scheduler lists a chunk when vLLM completes its
store (its bytes are whole in every rank's part) and unlists it before the
chunk is given to another store, each write bracketed by an odd sequence
number: a scheduler killed mid-write leaves an odd number, never a torn
listing, and a store cut short leaves its chunk unlisted. A restarted
scheduler lists what the index lists, provided the description is the
same; otherwise it clears the index and says what differs; an index it
cannot read is cleared, and said so.

Whatever fails, no engine stores into a kept tier whose index it does not
write through: the scheduler writes through the index of the segment its
own workers map (the claim says so) or stores nothing there. Where the
keeper cannot be asked (it does not answer), the engine stores nothing
until it can, so the index the last engine left stays true; where the
keeper holds no tier of this engine's (none runs, or this engine's workers
were given new memory), the engine's tier is its own and dies with it.
"""
import errno
import fcntl
import hashlib
import json
import logging
import mmap
import os
import struct
import time
from typing import Any, Dict, Iterator, Optional, Tuple

from . import ENGINE
from ..base import SharedSegmentError, keeper_in_use, keeper_lend, segment_name as _segment_name
from .rows import declaration, region_index_offset

_UTILS = "vllm.v1.core.kv_cache_utils"
_MANAGER = "vllm.v1.kv_offload.cpu.manager"
_POLICY = "vllm.v1.kv_offload.cpu.policies.base"
# Under vLLM's logger, as sharedseg.vllm's messages: its handler prints in every process.
_log = logging.getLogger("vllm.kv_offload.sharedseg")

MAGIC = b"SSEGVKV1"
FORMAT = 2
INDEX_HEADER = 4096
KEY_MAX = 64
ENTRY = 16 + KEY_MAX
_HEAD = struct.Struct("<8sIIII")  # magic, format, num_chunks, key bytes, description bytes
_ENTRY = struct.Struct("<QI4x")  # sequence, key length
_CLAIM_AT, CLAIM_BYTES = 24, 16
_DESC_AT = 64
DESC_MAX = INDEX_HEADER - _DESC_AT
_SEQ_MASK = (1 << 64) - 1


def index_bytes(num_chunks: int) -> int:
    """The index block's size for num_chunks chunks."""
    return INDEX_HEADER + num_chunks * ENTRY


def segment_name(keeper: str) -> str:
    """The kept tier's segment name: the same for every engine that keeps
    with keeper (vLLM's engine id changes with every start)."""
    return _segment_name("vllm", "keep", keeper)


def unstable_hashes() -> Optional[str]:
    """Why vLLM's block hashes would not mean the same in the next engine,
    or None where they would: NONE_HASH, the root of every block hash, is
    derived from a random seed when the hash algorithm is not a
    cryptographic one (xxhash) and PYTHONHASHSEED is unset."""
    seed = ENGINE.get(f"{_UTILS}.get_none_hash_seed")()
    if seed in (os.environ.get("PYTHONHASHSEED"), ENGINE.get(f"{_UTILS}.DEFAULT_NONE_HASH_SEED")):
        return None
    return ("vLLM's block hashes are not stable across restarts here (NONE_HASH has a random "
            "seed: --prefix-caching-hash-algo is not a cryptographic hash and PYTHONHASHSEED "
            "is unset); set PYTHONHASHSEED to one value for every start, or use sha256")


def description(config: Any) -> Dict[str, Any]:
    """What gives a block hash and its bytes their meaning, from vLLM's
    OffloadingConfig, and NONE_HASH's seed (the hash algorithm shows in
    the hashes themselves, not here: the seed is checked stable)."""
    seed = str(ENGINE.get(f"{_UTILS}.get_none_hash_seed")())
    return dict(declaration(config),
                none_hash_seed=hashlib.sha256(seed.encode()).hexdigest()[:16])


def _encode(desc: Dict[str, Any]) -> bytes:
    text = json.dumps(desc, sort_keys=True, separators=(",", ":")).encode()
    if len(text) > DESC_MAX:  # hundreds of layers: their names hashed
        desc = dict(desc, groups=hashlib.sha256(json.dumps(desc["groups"]).encode()).hexdigest())
        text = json.dumps(desc, sort_keys=True, separators=(",", ":")).encode()
    return text


def differences(kept: Dict[str, Any], now: Dict[str, Any]) -> str:
    """The parts that differ, "model: kept A, now B; ..."."""
    return "; ".join(f"{k}: kept {kept.get(k)!r}, now {now.get(k)!r}"
                     for k in sorted(set(kept) | set(now)) if kept.get(k) != now.get(k))


def claim_of(engine_id: str) -> bytes:
    """The claim an engine's owner writes in the index (CLAIM_BYTES)."""
    return hashlib.sha256(f"sharedseg-vllm-keep:{engine_id}".encode()).digest()[:CLAIM_BYTES]


class Unreadable(ValueError):
    """An index a predecessor left that cannot be read: said, and cleared."""


class TierIndex:
    """The index over a writable buffer of index_bytes(num_chunks) bytes."""

    def __init__(self, buf: memoryview, num_chunks: int):
        if len(buf) < index_bytes(num_chunks):
            raise ValueError(f"an index of {num_chunks} chunks needs {index_bytes(num_chunks)} "
                             f"bytes, the buffer has {len(buf)}")
        self.buf, self.num_chunks = buf, num_chunks

    def claim(self, engine_id: str) -> None:
        """Written by the group's owner: these workers map this segment."""
        self.buf[_CLAIM_AT:_CLAIM_AT + CLAIM_BYTES] = claim_of(engine_id)

    def claimed_by(self, engine_id: str) -> bool:
        return bytes(self.buf[_CLAIM_AT:_CLAIM_AT + CLAIM_BYTES]) == claim_of(engine_id)

    def kept_description(self) -> Optional[Dict[str, Any]]:
        """The description a predecessor wrote; None where it wrote none
        (new memory is zeros). Unreadable, with what is wrong, for one of
        another format or that does not parse as a JSON object."""
        magic, fmt, chunks, key_max, n = _HEAD.unpack_from(self.buf, 0)
        if magic == b"\0" * 8:
            return None
        if magic != MAGIC or fmt != FORMAT or chunks != self.num_chunks or key_max != KEY_MAX:
            raise Unreadable(f"another format (magic {magic!r}, format {fmt}, {chunks} chunks, "
                             f"keys of {key_max} bytes; this engine's: {MAGIC!r}, {FORMAT}, "
                             f"{self.num_chunks}, {KEY_MAX})")
        if n > DESC_MAX:
            raise Unreadable(f"a description of {n} bytes (at most {DESC_MAX})")
        try:
            desc = json.loads(bytes(self.buf[_DESC_AT:_DESC_AT + n]))
        except (ValueError, RecursionError) as e:  # bad JSON or UTF-8; nested past the stack
            raise Unreadable(f"its description is no JSON ({type(e).__name__}: "
                             f"{str(e)[:120]})") from None
        if not isinstance(desc, dict):
            raise Unreadable(f"its description is a JSON {type(desc).__name__}, not an object")
        return desc

    def start(self, desc: Dict[str, Any]) -> None:
        """Every chunk unlisted and desc written, the magic last."""
        text = _encode(desc)
        self.buf[:8] = b"\0" * 8
        for chunk in range(self.num_chunks):
            self.unlist(chunk)
        self.buf[_DESC_AT:_DESC_AT + len(text)] = text
        _HEAD.pack_into(self.buf, 0, MAGIC, FORMAT, self.num_chunks, KEY_MAX, len(text))

    def _write(self, chunk: int, key: bytes) -> None:
        at = INDEX_HEADER + chunk * ENTRY
        seq = _ENTRY.unpack_from(self.buf, at)[0]
        odd = (seq + 1) & _SEQ_MASK if seq % 2 == 0 else seq  # 2^64 - 1 is odd: wraps to 0
        struct.pack_into("<Q", self.buf, at, odd)
        struct.pack_into("<I", self.buf, at + 8, 0)
        self.buf[at + 16:at + 16 + len(key)] = key
        struct.pack_into("<I", self.buf, at + 8, len(key))
        struct.pack_into("<Q", self.buf, at, (odd + 1) & _SEQ_MASK)

    def list(self, chunk: int, key: bytes) -> None:
        if not 0 < len(key) <= KEY_MAX:
            raise ValueError(f"a key of {len(key)} bytes (the index holds 1 to {KEY_MAX})")
        self._write(chunk, key)

    def unlist(self, chunk: int) -> None:
        self._write(chunk, b"")

    def listed(self) -> Iterator[Tuple[int, bytes]]:
        """(chunk, key) of every complete listing."""
        for chunk in range(self.num_chunks):
            at = INDEX_HEADER + chunk * ENTRY
            seq, n = _ENTRY.unpack_from(self.buf, at)
            if seq % 2 == 0 and 0 < n <= KEY_MAX:
                yield chunk, bytes(self.buf[at + 16:at + 16 + n])


def claim_tier(buf: Any, num_chunks: int, row_stride: int, engine_id: str) -> None:
    """The group's owner, once the region is made: the index says which
    engine's workers map this segment, so that its scheduler writes
    through this index and no other (sharedseg.vllm's create_region)."""
    at = region_index_offset(num_chunks, row_stride, index_bytes(num_chunks))
    TierIndex(memoryview(buf)[at:at + index_bytes(num_chunks)], num_chunks).claim(engine_id)


class TierBusy(SharedSegmentError):
    """Another engine serves from the tier now."""


class NotKept(SharedSegmentError):
    """The keeper holds no tier of this engine's: its tier is its own."""


def _busy(keeper: str, name: str) -> TierBusy:
    return TierBusy(f"another engine serves from tier '{name}' (keeper '{keeper}') now: one "
                    f"engine per keeper name")


def lend_index(keeper: str, name: str, num_chunks: int, row_stride: int,
               engine_id: str) -> Tuple[Any, TierIndex]:
    """The tier's index, mapped through the keeper: (what to close, the
    index), once this engine's workers are known to map the segment the
    keeper lends (its claim) and no other scheduler writes its index: an
    exclusive flock on a description of this process's own (the kernel
    drops it when the process dies), held while the engine runs.
    TierBusy where another engine serves from it; NotKept where the keeper
    holds no tier of this engine's; SharedSegmentError where the keeper
    did not answer."""
    try:
        fd, size = keeper_lend(keeper, name)
    except SharedSegmentError as e:
        if e.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.EPERM):  # its workers' is unkept
            raise NotKept(str(e)) from None
        raise
    own, mapping = -1, None
    try:
        at = region_index_offset(num_chunks, row_stride, index_bytes(num_chunks))
        if at + index_bytes(num_chunks) > size:
            raise NotKept(f"keeper '{keeper}' holds segment '{name}' of {size} bytes, too "
                          f"small for {num_chunks} chunks and their index: another "
                          f"configuration's")
        # A description of our own: the keeper's is every borrower's.
        own = os.open(f"/proc/self/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
        mapping = mmap.mmap(own, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        view = memoryview(mapping)[at:at + index_bytes(num_chunks)]
        index = TierIndex(view, num_chunks)
        if not index.claimed_by(engine_id):
            view.release()
            if keeper_in_use(fd):
                raise _busy(keeper, name)
            raise NotKept(f"keeper '{keeper}' holds a segment '{name}' that this engine's "
                          f"workers do not map (they were given new memory: see their warning)")
        try:
            fcntl.flock(own, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            view.release()
            raise _busy(keeper, name) from None
    except BaseException:
        if mapping is not None:
            mapping.close()
        if own >= 0:
            os.close(own)
        raise
    finally:
        os.close(fd)
    return (mapping, view, own), index


_Manager = ENGINE.get(f"{_MANAGER}.CPUOffloadingManager", object)


class KeptOffloadingManager(_Manager):  # type: ignore[misc, valid-type]
    """vLLM's CPUOffloadingManager that writes which chunk holds which key
    through to the tier's index, and starts from what the index lists.

    The index is mapped at the first request, not at construction: vLLM
    builds the scheduler (and this manager) before it derives NONE_HASH,
    whose seed the description holds. Until the index is mapped the
    manager stores nothing (prepare_store gives None), so that no store
    lands in a chunk the index the last engine left still lists; a keeper
    that does not answer is asked again every RETRY_S. Where the keeper
    holds no tier of this engine's, the manager runs as vLLM's own and
    says that the tier will not outlive the engine."""

    RETRY_S = 30.0

    # The keep's state beside vLLM's, set by adopt.
    _keep: Tuple[str, str, int, str]  # keeper, tier's segment name, row stride, engine id
    _desc: Any
    _index: Optional[TierIndex]
    _mapping: Any
    _attach_state: str  # "new", "waiting" (for the keeper), "attached", "own" (not kept)
    _retry_at: float
    _said_long: bool

    @classmethod
    def adopt(cls, manager: Any, *, keeper: str, name: str, row_stride: int, desc: Any,
              engine_id: str) -> "KeptOffloadingManager":
        """vLLM's own manager, as vLLM's spec built it (with the arguments
        of that release: 0.33 added info), made a kept one in place, so
        that no argument of vLLM's is copied here to drift from vLLM's."""
        if type(manager) is not _Manager:
            raise TypeError(f"sharedseg keep serves vLLM's {_Manager.__name__}; this spec "
                            f"made a {type(manager).__name__}")
        manager.__class__ = cls
        manager._keep = (keeper, name, row_stride, engine_id)
        manager._desc = desc  # a function: the description, once NONE_HASH is known
        manager._index = None
        manager._mapping = None
        manager._attach_state = "new"
        manager._retry_at = 0.0
        manager._said_long = False
        return manager

    # ---- the index ----

    def _attach(self, req_context: Any) -> None:
        if self._attach_state in ("attached", "own") or time.monotonic() < self._retry_at:
            return
        keeper, name, row_stride, engine_id = self._keep
        try:
            self._mapping, index = lend_index(keeper, name, self._num_chunks, row_stride,
                                              engine_id)
        except TierBusy as e:  # refused at every call: no store may reach the other's chunks
            raise RuntimeError(f"sharedseg keep: {e}; stop it first, or give this engine "
                               f"another keeper") from None
        except NotKept as e:
            self._attach_state = "own"
            _log.warning("tier '%s': %s: this engine's tier is its own, and will not outlive "
                         "it", name, e)
            return
        except SharedSegmentError as e:
            self._attach_state = "waiting"
            self._retry_at = time.monotonic() + self.RETRY_S
            _log.warning("tier '%s': keeper '%s' could not be asked for its index (%s): this "
                         "engine stores nothing in the tier until it can (asked again in "
                         "%.0f s), so what the tier keeps for the next engine stays as it "
                         "was", name, keeper, e, self.RETRY_S)
            return
        self._attach_state = "attached"
        self._index = index
        self._start(index, req_context)

    def _start(self, index: TierIndex, req_context: Any) -> None:
        """What the index lists, restored, or the index started anew (said why)."""
        keeper, name = self._keep[:2]
        desc = self._desc()
        now = json.loads(_encode(desc))
        unstable = unstable_hashes()
        if unstable:  # what a predecessor listed goes; nothing is listed from now on
            _log.warning("tier '%s' is not kept for the next engine: %s", name, unstable)
            index.start(desc)
            self._index = None
            return
        try:
            kept = index.kept_description()
        except Unreadable as e:
            _log.warning("tier '%s' kept by '%s' has an index that cannot be read (%s): its "
                         "blocks are discarded", name, keeper, e)
            kept = None
        else:
            if kept is None:
                _log.info("tier '%s': new (keeper '%s' held no index for it)", name, keeper)
            elif kept != now:
                _log.warning("tier '%s' kept by '%s' was written by an engine configured "
                             "otherwise (%s): its blocks are discarded", name, keeper,
                             differences(kept, now))
                kept = None
        if kept is None:
            index.start(desc)
        else:
            self._restore(index, req_context)

    def _restore(self, index: TierIndex, req_context: Any) -> None:
        chunk_status = ENGINE.get(f"{_POLICY}.ChunkStatus")
        # 0.33's policies take the request that brings a chunk: here the first
        with_request = ENGINE.release() != "0.32"
        listed = set()
        for chunk_id, key in index.listed():
            if self._policy.get(key) is not None:  # listed twice, both whole: one is enough
                index.unlist(chunk_id)
                continue
            chunk = chunk_status(chunk_id)
            if with_request:
                self._policy.insert(key, chunk, req_context)
            else:
                self._policy.insert(key, chunk)
            chunk.ref_cnt = 0
            self._policy.mark_evictable(key)
            self._num_evictable_cache_chunks += 1
            listed.add(chunk_id)
        self._num_allocated_chunks = self._num_chunks
        self._free_list = [c for c in range(self._num_chunks - 1, -1, -1) if c not in listed]
        _log.info("tier '%s': %d of %d chunks kept from the last engine", self._keep[1],
                  len(listed), self._num_chunks)

    def close(self) -> None:
        if self._mapping is not None:
            mapping, view, fd = self._mapping
            view.release()
            self._index = None
            mapping.close()
            os.close(fd)  # and with it the lock
            self._mapping = None

    # ---- vLLM's manager, written through ----

    def _free_chunk(self, chunk: Any) -> None:
        if self._index is not None:
            self._index.unlist(chunk.chunk_id)
        super()._free_chunk(chunk)

    def on_new_request(self, req_context: Any) -> Any:
        self._attach(req_context)
        return super().on_new_request(req_context)

    def lookup(self, key: Any, req_context: Any) -> Any:
        self._attach(req_context)
        return super().lookup(key, req_context)

    def prepare_store(self, keys: Any, req_context: Any) -> Any:
        self._attach(req_context)
        if self._attach_state == "waiting":  # no store lands where the index is not written
            return None
        return super().prepare_store(keys, req_context)

    def complete_store(self, keys: Any, req_context: Any, success: bool = True) -> None:
        pending = []
        if success and self._index is not None:
            for key in keys:
                chunk = self._policy.get(key)
                if chunk is not None and not chunk.is_ready:
                    pending.append((chunk.chunk_id, key))
        super().complete_store(keys, req_context, success)
        for chunk_id, key in pending:
            if len(key) > KEY_MAX:  # served now, not kept: the index holds KEY_MAX bytes
                if not self._said_long:
                    _log.warning("tier '%s': block keys of %d bytes are not kept (the index "
                                 "holds %d)", self._keep[1], len(key), KEY_MAX)
                    self._said_long = True
                continue
            self._index.list(chunk_id, key)

    def reset_cache(self) -> None:
        super().reset_cache()
        if self._index is not None:
            for chunk in range(self._num_chunks):
                self._index.unlist(chunk)
