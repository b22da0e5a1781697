# SPDX-License-Identifier: Apache-2.0
"""LMCache's CPU tier (LocalCPUBackend) over one sharedseg segment.

LMCache allocates max_local_cpu_size per rank through MixedMemoryAllocator
(memory_management._allocate_cpu_memory: pinned memory, or a /dev/shm
segment with shm_name). SharedSegMemoryAllocator is a MixedMemoryAllocator
whose arena is a sharedseg segment instead: a memfd (no /dev/shm, nothing
left behind), on the page kind and NUMA node asked for, pinned by the
library where CUDA is. LocalCPUBackend takes it as memory_allocator=:

    from sharedseg.lmcache import SharedSegMemoryAllocator
    allocator = SharedSegMemoryAllocator(size, group=tp_group)
    backend = LocalCPUBackend(config, metadata, memory_allocator=allocator)

Over a group, every rank constructs the allocator together (a collective)
and maps the same arena; the allocating rank (owner_rank, default 0:
LMCache's first rank, the only one that stores for MLA models with
save_only_first_rank) places objects in it, and every other rank can read
them at their addresses (read_at) with no broadcast. LMCache itself has no
seam through which a passive rank learns rank 0's index (which key is at
which address) or pins an object against rank 0's eviction: see
docs/integrations.md. Without a group (group=None) the arena is this
rank's own, as LMCache's is.

Importing sharedseg never imports this module; this module imports LMCache.
"""
import importlib
import itertools
from typing import Any, Optional

import torch

from . import SharedSegmentError, create_shared_segment
from ._backends import torch_platform
from ._offload import segment_args

TESTED = ("0.5.6",)
_MODULES = ("lmcache.v1.memory_management",
            "lmcache.v1.memory_allocators.mixed_memory_allocator")


def _version() -> str:
    import importlib.metadata
    try:
        return importlib.metadata.version("lmcache")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def check_version() -> None:
    """RuntimeError, in a sentence, for an LMCache whose names differ."""
    version = _version()
    if version not in TESTED:
        raise RuntimeError(f"sharedseg.lmcache supports LMCache {', '.join(TESTED)}; this is "
                           f"LMCache {version}, whose allocator seam (MixedMemoryAllocator, "
                           f"memory_management._allocate_cpu_memory) it has not been checked "
                           f"against")


try:
    _mm = importlib.import_module(_MODULES[0])
    _Mixed = importlib.import_module(_MODULES[1]).MixedMemoryAllocator
except Exception:  # check_version says what differs
    _mm, _Mixed = None, object


class SharedSegMemoryAllocator(_Mixed):  # type: ignore[misc, valid-type]
    """MixedMemoryAllocator over one sharedseg segment of size bytes.

    group: the ranks that map it (a torch ProcessGroup, a GroupCoordinator,
    ...; None: this process alone). owner_rank: the rank whose allocate()
    places objects; on the others allocate() refuses. pages, numa,
    populate, populate_threads, timeout: create_shared_segment's. pin:
    "auto" (host registration where CUDA is), "host_register", "vmm",
    "none". Other keyword arguments are MixedMemoryAllocator's."""

    _count = itertools.count()

    def __init__(self, size: int, group: Any = None, *, owner_rank: int = 0,
                 pages: Optional[str] = None, numa: Any = None, populate: Optional[str] = None,
                 populate_threads: int = 0, timeout: Any = None, pin: str = "auto",
                 name: str = "lmcache-cpu", **kwargs: Any):
        check_version()
        if kwargs.get("shm_name") or kwargs.get("use_hugepages"):
            raise ValueError("SharedSegMemoryAllocator replaces shm_name and use_hugepages: "
                             "the arena is a memfd segment, its page kind is pages=")
        platform = torch_platform(torch)
        args = segment_args(dict(pages=pages, numa=numa, populate=populate, pin=pin,
                                 populate_threads=populate_threads, timeout=timeout), platform)
        self.segment = create_shared_segment(f"{name}-{next(self._count)}", size=size,
                                             comm_group=group, owner_rank=owner_rank, **args)
        self.owner_rank = owner_rank
        self.allocates = self.segment.rank == owner_rank
        arena = torch.frombuffer(self.segment.buffer(), dtype=torch.uint8, count=size)
        own = _mm._allocate_cpu_memory
        _mm._allocate_cpu_memory = lambda *a, **k: arena
        try:
            super().__init__(size, **kwargs)
        except BaseException:
            self.segment.close()
            raise
        finally:
            _mm._allocate_cpu_memory = own

    def allocate(self, *args: Any, **kwargs: Any) -> Any:
        if not self.allocates:
            raise RuntimeError(f"rank {self.segment.rank} reads the segment "
                               f"'{self.segment.name}'; rank {self.owner_rank} allocates in it")
        return super().allocate(*args, **kwargs)

    def batched_allocate(self, *args: Any, **kwargs: Any) -> Any:
        if not self.allocates:
            raise RuntimeError(f"rank {self.segment.rank} reads the segment "
                               f"'{self.segment.name}'; rank {self.owner_rank} allocates in it")
        return super().batched_allocate(*args, **kwargs)

    def read_at(self, address: int, nbytes: int) -> torch.Tensor:
        """A zero-copy uint8 view of nbytes at an object's address (its
        metadata.address on the allocating rank), on any rank. After
        close(): SharedSegmentError (the arena is gone; its bytes are not
        this allocator's to read any more)."""
        if self._unregistered:
            raise SharedSegmentError(f"read_at: the allocator over segment "
                                     f"'{self.segment.name}' is closed")
        if address < 0 or nbytes < 0 or address + nbytes > self.size:
            raise ValueError(f"[{address}, {address + nbytes}) is outside the "
                             f"{self.size}-byte arena")
        return self.buffer[address:address + nbytes]

    def close(self) -> None:
        """Releases the arena: the segment goes with the last rank's mapping."""
        if not self._unregistered:
            self._unregistered = True
            self.buffer = torch.empty(0, dtype=torch.uint8)
            self.segment.close()
