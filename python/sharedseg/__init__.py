"""sharedseg: one host-memory segment, allocated once, mapped zero-copy by
every rank of a group (a tensor-parallel group, an MPI job, ...).

    from sharedseg import create_shared_segment
    seg = create_shared_segment("kv", blocks={"k": dict(count=61, shape=(4096, 576),
                                dtype="bfloat16")}, world_size=4, rank_id=rank,
                                comm_group=group)
    k = seg.tensors("k")

Importing this package needs neither torch nor numpy.
"""
import json

from . import _native
from ._native import SharedSegmentError
from .segment import SharedSegment, create_shared_segment

__version__ = "0.1.0"
__all__ = ["create_shared_segment", "SharedSegment", "SharedSegmentError", "probe",
           "supported", "BLOB_SIZE", "HOST_ID_SIZE"]

BLOB_SIZE = _native.BLOB_SIZE
HOST_ID_SIZE = _native.HOST_ID_SIZE


def probe(size=0):
    """What this host can do, as the C library sees it (sseg_probe): memfd
    and sealing, THP knobs and whether madvise gets 2 MiB pages on shmem,
    HugeTLB pools, NUMA nodes, what pages="auto" would pick for size bytes
    (0: 1 GiB) and why, each backend's availability, and the knobs to change."""
    if isinstance(size, str):
        size = _native.parse("size", size)
    return json.loads(_native.probe_json(int(size)))


def supported(backend="auto", pages="auto"):
    """(True, "") when this system can create segments with that backend and
    page kind, else (False, the reason). Unknown names raise ValueError."""
    return _native.supported(_native.parse("backend", str(backend)),
                             _native.parse("pages", str(pages)))
