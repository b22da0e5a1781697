# SPDX-License-Identifier: Apache-2.0
"""HostPool: the host pool (sseg_pool_*), one keyed store of fixed-size
chunks that every engine process of this user on the host opens by name.

    from sharedseg import HostPool, pool_key
    pool = HostPool.open("kv", meaning="model=m;dtype=bfloat16;block=16",
                         chunk_size=64 << 10, chunks=1024)
    key = pool_key(b"block hash")
    (chunk,) = pool.reserve(key)          # None: stored already
    pool.chunk(chunk)[:5] = b"bytes"      # the bytes go straight in
    pool.publish([chunk])
    (hit,) = pool.get(key)                # pinned until unpin
    pool.unpin([hit])

The promises (one meaning per pool, a half-stored chunk never seen, what a
killed process held given back on the kernel's word, broken records reset
the pool) are the C library's: docs/c-api.md, "The host pool"."""
import hashlib
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from . import _native

KEY_SIZE: int = _native.POOL_KEY_SIZE

KeyLike = Union[bytes, bytearray, memoryview, str]


def pool_key(name: KeyLike) -> bytes:
    """The pool's key for a name: 32 bytes as they are, anything else (bytes
    of another length, text) its SHA-256."""
    if isinstance(name, str):
        name = name.encode()
    name = bytes(name)
    return name if len(name) == KEY_SIZE else hashlib.sha256(name).digest()


def pool_keys(names: Iterable[KeyLike]) -> bytes:
    """Keys for names, one after another: what get/reserve/drop take."""
    return b"".join(pool_key(n) for n in names)


def _keys(keys: Union[KeyLike, Sequence[KeyLike]]) -> bytes:
    if isinstance(keys, (bytes, bytearray, memoryview)):
        if len(keys) % KEY_SIZE:
            raise ValueError(f"keys: {len(keys)} bytes is not a whole number of "
                             f"{KEY_SIZE}-byte keys (pool_key() makes one of a name)")
        return bytes(keys)
    if isinstance(keys, str):
        return pool_key(keys)
    return pool_keys(keys)


class HostPool:
    """One process's handle of a host pool. Keys: bytes of whole 32-byte
    keys, or a sequence of names (each through pool_key). Chunk numbers
    come back as lists, None for a miss."""

    def __init__(self, native: Any):
        self._native = native
        self._view = memoryview(native)
        self.chunk_size: int = native.chunk_size
        self.chunks: int = native.chunks

    @classmethod
    def open(cls, name: str, *, meaning: Optional[str] = None, chunk_size: int = 0,
             chunks: int = 0,
             pages: str = "auto", keeper: Optional[str] = None, map_only: bool = False,
             existing: bool = False, timeout_s: float = 30.0) -> "HostPool":
        """Opens pool name: the one a live process of this user has open,
        else the one keeper holds, else a new one of chunks chunks of
        chunk_size bytes on pages ("auto", "base", "thp", "hugetlb-2M").
        meaning: what keys and bytes mean, ';'-separated fields (None:
        whatever the pool's is); another meaning, chunk_size or chunks than
        the pool's raises SharedSegmentError naming it. map_only: copy bytes only (a worker),
        no slot taken; existing: never make one."""
        flags = ((_native.POOL_MAP_ONLY if map_only else 0) |
                 (_native.POOL_EXISTING if existing else 0))
        native = _native.pool_open(name, meaning, chunk_size, chunks,
                                   _native.parse("pages", pages), flags,
                                   max(1, int(timeout_s * 1000)), keeper)
        return cls(native)

    def chunk(self, chunk: int) -> memoryview:
        """The bytes of chunk, writable, zero-copy."""
        if not 0 <= chunk < self.chunks:
            raise IndexError(f"chunk {chunk} of a pool of {self.chunks}")
        start = chunk * self.chunk_size
        return self._view[start:start + self.chunk_size]

    def buffer(self) -> memoryview:
        """Every chunk's bytes, chunk i at i * chunk_size."""
        return self._view

    def get(self, keys, prefix: bool = False) -> List[Optional[int]]:
        """Looks up and pins: each key's chunk, or None; prefix: only the
        leading run of hits (the rest None)."""
        return self._native.get(_keys(keys), prefix)

    def contains(self, keys, prefix: bool = False) -> int:
        """How many keys are stored (prefix: the leading run), nothing pinned."""
        return self._native.contains(_keys(keys), prefix)

    def unpin(self, chunks: Sequence[Optional[int]]) -> None:
        """Lets go of pins get() took, one each (None entries are skipped)."""
        self._native.unpin(list(chunks))

    def reserve(self, keys) -> List[Optional[int]]:
        """A chunk to fill for each key not stored yet (None where it is, or
        is being stored); evicts what nobody pins. SharedSegmentError
        (errno ENOSPC) when every chunk is pinned or being filled."""
        return self._native.reserve(_keys(keys))

    def publish(self, chunks: Sequence[Optional[int]]) -> int:
        """Makes filled chunks visible; how many were (a key stored meanwhile
        by another is given back)."""
        return self._native.publish(list(chunks))

    def abandon(self, chunks: Sequence[Optional[int]]) -> None:
        """Gives back reserved chunks unpublished (a store that failed)."""
        self._native.abandon(list(chunks))

    def drop(self, keys) -> int:
        """Forgets keys; how many were dropped (a pinned one is not)."""
        return self._native.drop(_keys(keys))

    def info(self) -> Dict[str, Any]:
        """sseg_pool_info: geometry, the memfd's inode, pages, this handle's
        slot, chunks used, filling, free and pinned, the attached pids, and
        the counters."""
        return self._native.info()

    def check(self) -> None:
        """Checks every record; a broken one resets the pool and raises."""
        self._native.check()

    def close(self) -> None:
        """Closes the handle: its pins, its slot and the mapping go once no
        view of its chunks (chunk(), buffer(), a tensor over them) is left."""
        self._view.release()
        self._native.close()

    @property
    def closed(self) -> bool:
        """close() was called."""
        return self._native.closed

    def __enter__(self) -> "HostPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
