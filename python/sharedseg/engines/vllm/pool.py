# SPDX-License-Identifier: Apache-2.0
"""vLLM's host KV tier in the host pool ("sharedseg": {"pool": NAME}): one
tier for every engine and data-parallel rank of one model on the host.
"keep": KEEPER alone is the pool named after the keeper (kept_pool_name),
held by it between engines: a tier that outlives the engine.

Every engine that names the pool opens the same host pool (sharedseg's
HostPool): its scheduler's manager (PoolOffloadingManager) looks blocks up,
pins, reserves and publishes through the pool, which is shared by every
scheduler on the host, and its workers map the pool's chunks as their
region (PoolSegment under spec.py's SharedSegRegion: row i is chunk i) and
copy to and from them. So engine B's request for a prefix engine A stored
loads A's chunks, while A runs and after it is gone; the host holds one
copy of each block.

The pool's meaning is the engine's declaration (declaration(): the model,
its dtype, the block geometry, the TP layout): an engine configured
otherwise is refused the pool with the field that differs, never given
another's bytes. With "keep": KEEPER beside it the keeper holds the pool
between engines, so an engine started later serves what earlier ones
stored.

What differs from vLLM's own manager, by design:
  - A block looked up as a hit is pinned for its request until it is
    loaded or the request ends: another engine may evict anything else at
    any moment, and vLLM's prepare_load assumes every looked-up block is
    still there.
  - Eviction is the pool's (a clock over every engine's blocks), so
    prepare_store reports no evicted keys: vLLM's KV events do not list
    evictions other engines cause.
  - reset_cache forgets what this engine looked up and pins, and from then
    on this engine's keys are its own (a reset number in every key): the
    blocks stored before the reset are not served to it again, while the
    other engines keep theirs.
"""
import errno
import hashlib
import logging
import os
from typing import Any, Collection, Dict, List, Optional, Tuple

from . import ENGINE
from ... import HostPool, SharedSegmentError, pool_key
from ..base import SegmentRequest, pool_meaning, segment_name
from .rows import declaration

_UTILS = "vllm.v1.core.kv_cache_utils"
_BASE = "vllm.v1.kv_offload.base"
_COMMON = "vllm.v1.kv_offload.cpu.common"
_HITS = "vllm.v1.metrics.cache_hit_source"
_log = logging.getLogger("vllm.kv_offload.sharedseg")

_Manager = ENGINE.get(f"{_BASE}.OffloadingManager", object)


def kept_pool_name(keeper: str) -> str:
    """The pool of "keep": KEEPER alone: the same for every engine that
    keeps with keeper (vLLM's engine id changes with every start)."""
    return segment_name("vllm", "kept", keeper)


def pool_name(request: SegmentRequest) -> str:
    """The engine's pool: the one it names, else its keeper's."""
    return request.pool or kept_pool_name(str(request.keep))


def unstable_hashes() -> Optional[str]:
    """Why vLLM's block hashes would not mean the same in another engine
    process, or None where they would: NONE_HASH, the root of every block
    hash, is derived from a random seed when the hash algorithm is not a
    cryptographic one (xxhash) and PYTHONHASHSEED is unset."""
    seed = ENGINE.get(f"{_UTILS}.get_none_hash_seed")()
    if seed in (os.environ.get("PYTHONHASHSEED"), ENGINE.get(f"{_UTILS}.DEFAULT_NONE_HASH_SEED")):
        return None
    return ("vLLM's block hashes differ from one engine process to the next here (NONE_HASH "
            "has a random seed: --prefix-caching-hash-algo is not a cryptographic hash and "
            "PYTHONHASHSEED is unset); set PYTHONHASHSEED to one value for every engine, or "
            "use sha256")


def meaning(config: Any) -> str:
    """The pool's meaning for this engine: its declaration as the pool's
    ';'-separated fields, the layers' names as a count and a hash (a
    model's hundreds of layers would not fit the pool's 1023 bytes)."""
    fields = declaration(config)
    groups = fields.pop("groups")
    digest = hashlib.sha256(repr(groups).encode()).hexdigest()[:16]
    fields["groups"] = ",".join(f"{gid}/{tpb}/{len(names)}" for gid, tpb, names in groups) + \
        f"#{digest}"
    text = pool_meaning("vllm", fields)
    if len(text.encode()) > 1023:  # a model path of hundreds of bytes
        fields["model"] = hashlib.sha256(str(fields["model"]).encode()).hexdigest()[:32]
        text = pool_meaning("vllm", fields)
    return text


def open_pool(request: SegmentRequest, config: Any, chunk_size: int, chunks: int, *,
              map_only: bool) -> HostPool:
    """The engine's pool, opened as its declaration: SharedSegmentError, in
    a sentence naming the setting and what differs, where the pool holds
    another engine's declaration."""
    setting = f"pool={request.pool!r}" if request.pool else f"keep={request.keep!r}"
    timeout = request.timeout
    if timeout is None or (timeout == 0 and not isinstance(timeout, bool)):
        timeout = 30.0  # the default, as for a segment
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
            not 0 < timeout < 2_000_000:  # C's int milliseconds: about 24 days
        raise ValueError(f"sharedseg setting timeout={request.timeout!r}: expected seconds > 0 "
                         f"and under 2000000 (0 or none: 30)")
    try:
        return HostPool.open(pool_name(request), meaning=meaning(config), chunk_size=chunk_size,
                             chunks=chunks, pages=request.pages or "auto",
                             keeper=request.keep or None, map_only=map_only,
                             timeout_s=float(timeout))
    except SharedSegmentError as e:
        said = SharedSegmentError(f"sharedseg setting {setting}: {e}")
        said.errno = e.errno
        raise said from None


class PoolSegment:
    """A worker's map-only handle of the pool, as SharedSegRegion reads a
    segment (buffer(), info, name, rank, world_size, is_owner, close()):
    chunk i at i * chunk_size, which is the region's row i. Not pinned by
    sharedseg: on CUDA vLLM's worker registers its mapping, as it does its
    own region's (untested on hardware)."""

    def __init__(self, pool: HostPool, rank: int, world_size: int):
        facts = pool.info()
        self.pool, self.name = pool, facts["name"]
        self.info: Dict[str, Any] = dict(pinned=False, pages=facts["pages"],
                                         page_size=facts["page_size"])
        self.rank, self.world_size, self.is_owner = rank, world_size, False

    def buffer(self) -> memoryview:
        return self.pool.buffer()

    def close(self) -> None:
        self.pool.close()


class PoolOffloadingManager(_Manager):  # type: ignore[misc, valid-type]
    """vLLM's OffloadingManager over the host pool: lookup pins a hit for
    the request, prepare_load hands the pinned chunks to the workers,
    complete_load unpins them; prepare_store reserves chunks (evicting
    what no engine pins), complete_store publishes them (or gives them
    back when the store failed)."""

    def __init__(self, pool: HostPool, name: str):
        self.pool, self.name = pool, name
        self._resets = 0
        self._hashes_checked = False
        # Pins: of the blocks each request looked up (let go at its load or
        # its end), and of blocks being loaded (let go at complete_load, as
        # vLLM's manager keeps a block being loaded past its request's end).
        self._held: Dict[str, Dict[bytes, int]] = {}
        self._loading: Dict[Tuple[str, bytes], List[int]] = {}
        self._storing: Dict[bytes, int] = {}
        self._spec = ENGINE.get(f"{_COMMON}.CPULoadStoreSpec")
        self._result = ENGINE.get(f"{_BASE}.LookupResult")

    def _key(self, key: bytes) -> bytes:
        """The pool's key of vLLM's OffloadKey (block hash and group): the
        key itself until this engine's first reset_cache, then salted with
        the reset's number."""
        return pool_key(bytes(key) if not self._resets else b"%d:" % self._resets + bytes(key))

    def _looked_up(self, req_context: Any) -> Dict[bytes, int]:
        return self._held.setdefault(req_context.req_id, {})

    # ---- vLLM's manager ----

    def on_new_request(self, req_context: Any) -> Any:
        if not self._hashes_checked:  # NONE_HASH is derived after the manager is built
            self._hashes_checked = True
            unstable = unstable_hashes()
            if unstable:
                _log.warning("sharedseg pool '%s': this engine shares no block with another "
                             "engine, nor with the next one: %s", self.name, unstable)
        self._looked_up(req_context)
        return ENGINE.get(f"{_BASE}.RequestOffloadingContext")()

    def lookup(self, key: Any, req_context: Any) -> Any:
        held = self._looked_up(req_context)
        if key in held:
            return self._result.HIT
        (chunk,) = self.pool.get(self._key(key))
        if chunk is None:
            return self._result.MISS
        held[key] = chunk
        return self._result.HIT

    def get_load_source(self, key: Any, req_context: Any) -> Any:
        return ENGINE.get(f"{_HITS}.CacheHitSource").HOST

    def prepare_load(self, keys: Collection[Any], req_context: Any) -> Any:
        keys, held, chunks = list(keys), self._looked_up(req_context), []
        for key in keys:
            chunk = held.pop(key, None)
            if chunk is None:  # not looked up by this request: pinned now, or refused
                (chunk,) = self.pool.get(self._key(key))
                if chunk is None:
                    self.pool.unpin(chunks)
                    raise RuntimeError(f"sharedseg pool '{self.name}': a block vLLM asks to "
                                       f"load was not looked up by its request and is not in "
                                       f"the pool")
            chunks.append(chunk)
        for key, chunk in zip(keys, chunks):
            self._loading.setdefault((req_context.req_id, key), []).append(chunk)
        return self._spec(chunks)

    def touch(self, keys: Collection[Any], req_context: Any) -> None:
        keys = list(keys)
        if keys:  # a lookup marks a block recently used: pinned and let go at once
            self.pool.unpin(self.pool.get(b"".join(self._key(k) for k in keys)))

    def complete_load(self, keys: Collection[Any], req_context: Any) -> None:
        chunks = []
        for key in keys:
            loading = self._loading.get((req_context.req_id, key))
            if loading:
                chunks.append(loading.pop())
                if not loading:
                    del self._loading[(req_context.req_id, key)]
        self.pool.unpin(chunks)

    def prepare_store(self, keys: Collection[Any], req_context: Any) -> Any:
        keys = [k for k in keys if k not in self._storing]
        try:
            chunks = self.pool.reserve(b"".join(self._key(k) for k in keys)) if keys else []
        except SharedSegmentError as e:
            if e.errno == errno.ENOSPC:  # every chunk pinned or being filled
                return None
            raise
        mine = [(k, c) for k, c in zip(keys, chunks) if c is not None]
        self._storing.update(mine)
        return ENGINE.get(f"{_BASE}.PrepareStoreOutput")(
            keys_to_store=[k for k, _ in mine], store_spec=self._spec([c for _, c in mine]),
            evicted_keys=[])

    def complete_store(self, keys: Collection[Any], req_context: Any,
                       success: bool = True) -> None:
        chunks = [self._storing.pop(k) for k in keys if k in self._storing]
        if chunks:
            (self.pool.publish if success else self.pool.abandon)(chunks)

    def on_request_finished(self, req_context: Any) -> None:
        held = self._held.pop(req_context.req_id, None)
        if held:
            self.pool.unpin(list(held.values()))

    def reset_cache(self) -> None:
        """The lookups' pins let go, and this engine's keys its own from now
        on (the module's docstring says why). Loads and stores in flight keep
        their pins and chunks: vLLM flushes them in the workers after this
        call and drops their completions, so what they hold goes back when
        the pool is closed."""
        for held in self._held.values():
            self.pool.unpin(list(held.values()))
            held.clear()
        self._loading.clear()
        self._storing.clear()
        self._resets += 1
        _log.info("sharedseg pool '%s': reset: this engine no longer serves what was stored "
                  "before (the other engines keep it)", self.name)

    def shutdown(self) -> None:
        if not self.pool.closed:
            self.pool.close()  # its pins and reservations go with it


def pool_manager(request: SegmentRequest, config: Any, chunk_size: int,
                 chunks: int) -> PoolOffloadingManager:
    """The scheduler's manager over the engine's pool."""
    pool = open_pool(request, config, chunk_size, chunks, map_only=False)
    facts, name = pool.info(), pool_name(request)
    _log.info("sharedseg pool '%s': %d chunks of %d bytes on %s pages, %s%s", name,
              facts["chunks"], facts["chunk_size"], facts["pages"],
              "made by this engine" if facts["created"] else
              f"found with {facts['used']} chunks stored (by the engines that have it open, "
              f"or kept)", f", kept by '{request.keep}'" if facts["kept"] else
              (", kept by no one" if request.keep else ""))
    return PoolOffloadingManager(pool, name)
