# SPDX-License-Identifier: Apache-2.0
"""sharedseg: one host-memory segment, allocated once, mapped zero-copy by
every rank of a group (a tensor-parallel group, an MPI job, ...).

    from sharedseg import create_shared_segment
    seg = create_shared_segment("kv", blocks={"k": dict(count=61, shape=(4096, 576),
                                dtype="bfloat16")}, comm_group=tp_group)
    k = seg.tensors("k")

Importing this package needs neither torch nor numpy. The C library's
messages go to logging.getLogger("sharedseg").
"""
from typing import Any, Dict, List, Tuple, Union

from . import _backends, _log, _native
from ._errors import SharedSegmentKeyError, SharedSegmentTypeError, SharedSegmentValueError
from ._native import SharedSegmentError
from ._protocol import create_shared_segment
from .pool import HostPool, pool_key, pool_keys
from .segment import SharedSegment

__version__: str = _native.LIBRARY_VERSION  # include/sharedseg.h, as the wheel's metadata
__all__ = ["create_shared_segment", "SharedSegment", "SharedSegmentError",
           "SharedSegmentValueError", "SharedSegmentTypeError", "SharedSegmentKeyError",
           "HostPool", "pool_key", "pool_keys", "probe", "supported",
           "shared_segment_supported", "list_segments", "list_pools", "BLOB_SIZE", "HOST_ID_SIZE",
           "LIBRARY_VERSION"]

BLOB_SIZE: int = _native.BLOB_SIZE
HOST_ID_SIZE: int = _native.HOST_ID_SIZE
LIBRARY_VERSION: str = _native.LIBRARY_VERSION

_log.install()


def probe(size: Union[int, str] = 0) -> Dict[str, Any]:
    """What this host can do, as the C library sees it: the object that
    `sharedseg probe --json` prints (one document, written once). Its "schema"
    field is the version of this layout; docs/python.md ("Host facts,
    messages") lists the keys. size: the segment size pages="auto" is decided for, in bytes or
    as text ("64GiB"); 0: 1 GiB."""
    if isinstance(size, str):
        size = _native.parse("size", size)
    return _native.probe(size)


def list_segments() -> List[Dict[str, Any]]:
    """Every segment live on this host that this user may see (root: all),
    as `sharedseg ls --json` lists them (one document), read from /proc:
    each a dict with name, uid (whose it is: the user its owner runs as),
    inode (the memfd's inode, which tells apart two segments of one name),
    backend ("memfd", "cuda", "ascend"), size, pages,
    page_size, resident_bytes, numa_nodes, world_size, owner_rank,
    owner_pid, unmapped (nobody maps it, a descriptor keeps it), kept_by
    (the keeper that holds it: `sharedseg keep`) and processes (pid, uid,
    comm, rank, mapped_bytes, resident_bytes, holds_fd, readonly, keeper);
    unknown values are None. The cuda and ascend backends'
    memory is the driver's, which /proc does not name: their segments are
    seen from each rank's tag page, declared (size, pages and rank are what
    the tags say), with inode, resident_bytes and each process's
    mapped_bytes None."""
    return _native.list_segments()["segments"]


def list_pools() -> List[Dict[str, Any]]:
    """This user's host pools (HostPool), as `sharedseg ls --json` lists them
    under "pools": each a dict with name, meaning, inode, chunk_size,
    chunks, size, pages, page_size, used, filling, free, pinned, hits,
    misses, stores, evictions, reclaims, duplicates, resets, last_reset,
    kept_by (the keeper that holds it) and processes (pid, slot, comm: each
    process that holds a slot). Found by their records in this user's
    runtime directory, read without taking a slot."""
    return _native.list_segments()["pools"]


def supported(backend: str = "auto", pages: str = "auto") -> Tuple[bool, str]:
    """(True, "") when this system can create segments with that backend
    ("auto", "memfd", "cuda", "ascend") and pages (a page kind: "auto",
    "base", "thp", "hugetlb-2M", ...), else (False, the reason). Unknown
    names raise ValueError."""
    return _native.supported(_native.parse("backend", str(backend)),
                             _native.parse("pages", str(pages)))


def shared_segment_supported(mmap: bool = True, host_register: bool = False) -> bool:
    """Mooncake's shared_segment_supported, for a program written against
    mooncake.shared_segment: whether create_shared_segment(..., mmap=mmap,
    host_register=host_register) can work here. mmap True: a host-memory
    segment, and for host_register a CUDA driver that loads; mmap False:
    a device backend's VMM host memory."""
    return _backends.segment_supported(mmap, host_register)
