# SPDX-License-Identifier: Apache-2.0
"""LMCache's host tier shared by every LMCache instance on the host: a
storage plugin (HostPoolBackend) over the host pool (sharedseg's HostPool),
switched on by LMCache's own configuration:

    max_local_cpu_size: 1                  # LMCache's own CPU tier: the hot tier
    pre_caching_hash_algorithm: sha256_cbor  # keys alike in every instance
    storage_plugins: [sharedseg_pool]
    extra_config:
      storage_plugin.sharedseg_pool.module_path: sharedseg.engines.lmcache.pool
      storage_plugin.sharedseg_pool.class_name: HostPoolBackend
      sharedseg.pool: kv                   # the pool's name on this host
      sharedseg.pool_size: 8               # GB, as max_local_cpu_size
      sharedseg.pool_keep: NAME            # optional: a keeper holds the pool

Every instance (each vLLM engine with LMCache, each rank) that names the
pool stores its chunks there once per host and finds the others': a put
reserves a chunk, copies the chunk's bytes in and publishes it; a lookup
that LMCache pins, pins the chunk until LMCache unpins it; a get copies the
bytes into a memory object of LMCache's own CPU tier (which LMCache then
keeps as a hot copy). The pool's meaning is the instance's declaration
(the model, the world size, the KV dtype and shape, MLA or not), so an
instance configured otherwise is refused the pool by field.

A chunk holds a header (the object's shape, dtype and memory format, and
its length) and the object's bytes. Objects of several tensors, or larger
than a full chunk of the declaration, are not stored in the pool (said
once). Keys are LMCache's CacheEngineKey as text (its model, world size,
worker, chunk hash), hashed to the pool's 32 bytes.

A configuration the plugin cannot serve stops the engine's start with one
sentence (SystemExit: LMCache's plugin loader logs and goes on past any
Exception, which would leave the engine without the tier).

Importing sharedseg never imports this module; this module imports LMCache
(through ENGINE, sharedseg.engines.lmcache).
"""
import errno
import logging
import math
import os
import struct
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from ... import HostPool, SharedSegmentError, pool_key
from . import ENGINE, POOL
from ..base import pool_meaning

_ABSTRACT = "lmcache.v1.storage_backend.abstract_backend"
_MEMORY = "lmcache.v1.memory_management"
_log = logging.getLogger("lmcache.sharedseg")

NAME_KEY, SIZE_KEY, KEEP_KEY = "sharedseg.pool", "sharedseg.pool_size", "sharedseg.pool_keep"
GB = 1 << 30  # LMCache's GB (its sizes count 2**30 bytes)
HEADER = 128
_HEAD = struct.Struct("<8sQIIB7x")  # magic, bytes, dtype, format, dims
_MAGIC = b"SSEGLMC1"
_DIMS_MAX = 8
# The dtypes a header names, by number (a header's number past this list is
# never served).
DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.uint8, torch.int8,
          torch.float8_e4m3fn, torch.float8_e5m2)

_Plugin = ENGINE.get(f"{_ABSTRACT}.StoragePluginInterface", object)


def _refuse(sentence: str) -> SystemExit:
    return SystemExit(f"sharedseg.engines.lmcache.pool: {sentence}")


def declaration(metadata: Any) -> str:
    """The pool's meaning for an LMCache instance: what gives a key and its
    bytes their meaning."""
    shape = "x".join(str(d) for d in metadata.kv_shape)
    fields = dict(model=metadata.model_name, world_size=metadata.world_size,
                  kv_dtype=str(metadata.kv_dtype).removeprefix("torch."), kv_shape=shape,
                  mla=bool(metadata.use_mla))
    return pool_meaning("lmcache", fields)


def chunk_bytes(metadata: Any) -> int:
    """A pool chunk: the header and one full LMCache chunk of KV, rounded to
    64 bytes (the pool's multiple)."""
    full = math.prod(metadata.kv_shape) * torch.empty((), dtype=metadata.kv_dtype).element_size()
    return -(-(HEADER + full) // 64) * 64


class HostPoolBackend(_Plugin):  # type: ignore[misc, valid-type]
    """LMCache's StoragePluginInterface over the host pool."""

    def __init__(self, config: Any = None, dst_device: str = "cpu", metadata: Any = None,
                 local_cpu_backend: Any = None, loop: Any = None):
        ENGINE.check(POOL)
        super().__init__(dst_device=dst_device, config=config, metadata=metadata,
                         local_cpu_backend=local_cpu_backend, loop=loop)
        extra = dict(config.extra_config or {}) if config is not None else {}
        name = extra.get(NAME_KEY)
        if not isinstance(name, str) or not name:
            raise _refuse(f"extra_config {NAME_KEY}: expected the pool's name, got {name!r}")
        if local_cpu_backend is None:
            raise _refuse("the pool is the host tier behind LMCache's own CPU tier, which "
                          "this configuration does not build (set max_local_cpu_size above "
                          "0; and not for the scheduler role)")
        size = extra.get(SIZE_KEY)
        if isinstance(size, bool) or not isinstance(size, (int, float)) or size <= 0:
            raise _refuse(f"extra_config {SIZE_KEY}: expected the pool's size in GB, got "
                          f"{size!r}")
        self.chunk_size = chunk_bytes(metadata)
        chunks = int(size * GB) // self.chunk_size
        if chunks < 1:
            raise _refuse(f"extra_config {SIZE_KEY}={size} holds no chunk of "
                          f"{self.chunk_size} bytes")
        try:
            self.pool = HostPool.open(name, meaning=declaration(metadata),
                                      chunk_size=self.chunk_size, chunks=chunks,
                                      keeper=extra.get(KEEP_KEY) or None)
        except SharedSegmentError as e:
            raise _refuse(f"extra_config {NAME_KEY}={name!r}: {e}") from None
        self.name = name
        self._lock = threading.Lock()
        self._pins: Dict[bytes, List[int]] = {}
        self._said: set = set()
        algorithm = getattr(config, "pre_caching_hash_algorithm", None)
        if algorithm not in ("sha256", "sha256_cbor") and not os.environ.get("PYTHONHASHSEED"):
            _log.warning("sharedseg pool '%s': LMCache's pre_caching_hash_algorithm %s starts "
                         "every prefix from a random seed here (PYTHONHASHSEED is unset): this "
                         "instance's keys are its own, and nothing it stores is shared; use "
                         "sha256_cbor, or set PYTHONHASHSEED alike for every instance", name,
                         algorithm)
        facts = self.pool.info()
        _log.info("sharedseg pool '%s': %d chunks of %d bytes on %s pages, %s", name,
                  facts["chunks"], facts["chunk_size"], facts["pages"],
                  "made by this instance" if facts["created"] else "shared with the "
                  "instances that opened it")

    # ---- the chunk's header ----

    def _say_once(self, what: str) -> None:
        if what not in self._said:
            self._said.add(what)
            _log.warning("sharedseg pool '%s': %s", self.name, what)

    def _fits(self, obj: Any) -> bool:
        shapes, dtypes = obj.get_shapes(), obj.get_dtypes()
        if len(shapes) != 1 or len(dtypes) != 1:
            self._say_once("memory objects of several tensors are not stored in the pool")
            return False
        if dtypes[0] not in DTYPES or len(shapes[0]) > _DIMS_MAX:
            self._say_once(f"memory objects of {dtypes[0]} or {len(shapes[0])} dimensions are "
                           f"not stored in the pool")
            return False
        if obj.get_size() > self.chunk_size - HEADER:
            self._say_once(f"memory objects of {obj.get_size()} bytes are larger than the "
                           f"pool's chunk ({self.chunk_size - HEADER} bytes): not stored")
            return False
        return True

    def _write(self, chunk: int, obj: Any) -> None:
        view = self.pool.chunk(chunk)
        shape = list(obj.get_shape())
        nbytes = obj.get_size()
        _HEAD.pack_into(view, 0, _MAGIC, nbytes, DTYPES.index(obj.get_dtype()),
                        obj.get_memory_format().value, len(shape))
        struct.pack_into(f"<{_DIMS_MAX}q", view, _HEAD.size,
                         *(shape + [0] * (_DIMS_MAX - len(shape))))
        dst = torch.frombuffer(view, dtype=torch.uint8, count=nbytes, offset=HEADER)
        dst.copy_(obj.tensor.reshape(-1).view(torch.uint8)[:nbytes])

    def _read(self, chunk: int) -> Optional[Any]:
        """A memory object of LMCache's CPU tier holding the chunk's bytes;
        None where the header is none of ours or LMCache has no room."""
        view = self.pool.chunk(chunk)
        magic, nbytes, dtype, fmt, dims = _HEAD.unpack_from(view, 0)
        if magic != _MAGIC or dtype >= len(DTYPES) or dims > _DIMS_MAX or \
                nbytes > self.chunk_size - HEADER:
            self._say_once(f"chunk {chunk} holds no object this plugin stored: not served")
            return None
        shape = torch.Size(struct.unpack_from(f"<{_DIMS_MAX}q", view, _HEAD.size)[:dims])
        obj = self.local_cpu_backend.allocate(shape, DTYPES[dtype],
                                              ENGINE.get(f"{_MEMORY}.MemoryFormat")(fmt))
        if obj is None:
            return None
        if obj.get_size() != nbytes:
            obj.ref_count_down()
            self._say_once(f"chunk {chunk}'s header does not match its object: not served")
            return None
        src = torch.frombuffer(view, dtype=torch.uint8, count=nbytes, offset=HEADER)
        obj.tensor.reshape(-1).view(torch.uint8)[:nbytes].copy_(src)
        return obj

    # ---- LMCache's storage backend ----

    @staticmethod
    def _key(key: Any) -> bytes:
        return pool_key(key.to_string())

    def contains(self, key: Any, pin: bool = False) -> bool:
        if not pin:
            return self.pool.contains(self._key(key)) == 1
        return self.pin(key)

    def batched_contains(self, keys: List[Any], pin: bool = False) -> int:
        if not keys:
            return 0
        packed = b"".join(self._key(k) for k in keys)
        if not pin:
            return self.pool.contains(packed, prefix=True)
        chunks = self.pool.get(packed, prefix=True)
        with self._lock:
            for k, c in zip(keys, chunks):
                if c is not None:
                    self._pins.setdefault(self._key(k), []).append(c)
        return sum(c is not None for c in chunks)

    async def batched_async_contains(self, lookup_id: str, keys: List[Any],
                                     pin: bool = False) -> int:
        return self.batched_contains(keys, pin)

    def exists_in_put_tasks(self, key: Any) -> bool:
        return False  # every put is done in its call

    def batched_submit_put_task(self, keys: Sequence[Any], objs: List[Any],
                                transfer_spec: Any = None,
                                on_complete_callback: Optional[Callable[[Any], None]] = None
                                ) -> None:
        pairs = [(k, o) for k, o in zip(keys, objs) if self._fits(o)]
        if not pairs:
            return None
        try:
            chunks = self.pool.reserve(b"".join(self._key(k) for k, _ in pairs))
        except SharedSegmentError as e:
            if e.errno == errno.ENOSPC:  # every chunk pinned or being filled
                self._say_once("the pool was full of pinned chunks: some stores were skipped")
                return None
            raise
        taken = [c for c in chunks if c is not None]
        try:
            for (key, obj), chunk in zip(pairs, chunks):
                if chunk is not None:
                    self._write(chunk, obj)
        except BaseException:
            self.pool.abandon(taken)
            raise
        self.pool.publish(taken)
        if on_complete_callback is not None:
            for key, _ in pairs:
                try:
                    on_complete_callback(key)
                except Exception as e:  # as LMCache's own backends: logged
                    _log.warning("sharedseg pool '%s': a store's callback failed: %s",
                                 self.name, e)
        return None

    async def async_batched_submit_put_task(self, keys: Sequence[Any], objs: List[Any],
                                            transfer_spec: Any = None,
                                            on_complete_callback: Any = None) -> None:
        self.batched_submit_put_task(keys, objs, transfer_spec, on_complete_callback)

    def get_blocking(self, key: Any) -> Optional[Any]:
        (chunk,) = self.pool.get(self._key(key))
        if chunk is None:
            return None
        try:
            return self._read(chunk)
        finally:
            self.pool.unpin([chunk])

    def batched_get_blocking(self, keys: List[Any]) -> List[Optional[Any]]:
        return [self.get_blocking(k) for k in keys]

    async def batched_get_non_blocking(self, lookup_id: str, keys: List[Any],
                                       transfer_spec: Any = None) -> List[Any]:
        got = []
        for key in keys:  # LMCache's contract: the leading run it asked for
            obj = self.get_blocking(key)
            if obj is None:
                break
            got.append(obj)
        self.batched_unpin(keys)
        return got

    def pin(self, key: Any) -> bool:
        (chunk,) = self.pool.get(self._key(key))
        if chunk is None:
            return False
        with self._lock:
            self._pins.setdefault(self._key(key), []).append(chunk)
        return True

    def unpin(self, key: Any) -> bool:
        with self._lock:
            held = self._pins.get(self._key(key))
            chunk = held.pop() if held else None
            if held == []:
                del self._pins[self._key(key)]
        if chunk is None:
            return False
        self.pool.unpin([chunk])
        return True

    def batched_unpin(self, keys: List[Any]) -> None:
        for key in keys:
            self.unpin(key)

    def remove(self, key: Any, force: bool = True) -> bool:
        return self.pool.drop(self._key(key)) == 1

    def touch_cache(self) -> None:
        return  # the pool's clock marks what is looked up

    def get_allocator_backend(self) -> Any:
        return self.local_cpu_backend

    def close(self) -> None:
        if not self.pool.closed:
            self._pins.clear()
            self.pool.close()  # its pins go with it
