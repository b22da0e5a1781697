# SPDX-License-Identifier: Apache-2.0
"""SharedSegment: one rank's mapping of the group's segment, and the
zero-copy views over it (tensors, arrays, buffer). create_shared_segment
(_protocol) makes it; layout and offsets are the C library's."""
import math
import warnings
from typing import Any, Dict, List, Optional, Tuple

from . import _dtypes, _ipc
from ._errors import SharedSegmentKeyError
from ._native import SharedSegmentError
from ._plan import Block, Plan


class SharedSegment:
    """One rank's mapping of the group's segment.

    Views (tensors(), arrays(), buffer()) keep the pages mapped: close() or
    dropping this object unmaps them only once the last view is gone. With
    host_register=True (or a pinned backend: cuda, ascend) the device is
    synchronised before the pages go (torch.cuda, or torch.npu where
    torch_npu is loaded), so a non_blocking copy still running on torch's
    current device or on device_id cannot outlive them.
    """

    def __init__(self, native: Any, plan: Plan, world_size: int, rank: int,
                 facts: Dict[str, Any]):
        self._native = native
        self._plan = plan
        self._blocks = plan.blocks
        self._layout = plan.layout
        self.name: str = plan.name
        self.world_size: int = world_size
        self.rank: int = rank
        self.device_id: int = plan.device
        self.owner_rank: int = facts["owner_rank"]
        self.is_owner: bool = facts["is_owner"]
        # The ranks of the group that map this rank's copy (this rank too),
        # in rank order: those of its host, or every rank where one owner's
        # fabric handle serves them all.
        self.sharing_ranks: List[int] = facts["sharing_ranks"]
        self.readonly: bool = native.readonly
        self._pages = f"{facts['pages']} ({_size_text(facts['page_size'])} pages)"

    # ---- the whole segment ----

    def base_addr(self) -> int:
        """This rank's address of the segment's first byte."""
        self._open()
        return self._native.base

    def total_size(self) -> int:
        """The segment's size in bytes (the layout's, or size=)."""
        return self._native.size

    def device_addr(self) -> Optional[int]:
        """The device address of the segment: of the registered mapping
        (host_register=True) or of the CUDA VMM mapping (mmap=False); None
        when the segment has none."""
        return self.info["device_addr"] or None

    @property
    def info(self) -> Dict[str, Any]:
        """What the C library reports (sseg_info): backend, page kind and
        size obtained, whether verified, huge bytes, NUMA nodes found,
        timings, why these pages, pinned, memfd_name, kept; and "settings": the
        value and source ("argument", "SHAREDSEG_PAGES", "default", ...) of
        pages, numa, populate and timeout, and the population allowance
        added to every wait."""
        self._open()
        facts = self._native.info()
        facts["settings"] = self._plan.settings
        return facts

    def populate_progress(self) -> Tuple[int, int]:
        """(resident, total): bytes of the segment's memory resident now,
        whoever faulted them (populate="background"'s work, any rank's first
        touch), of the bytes mapped. Pages, not this rank's page tables."""
        self._open()
        resident, total = self._native.populate_progress()
        return resident, total

    def wait_populated(self, timeout: Optional[float] = None) -> None:
        """With populate="background", waits until the segment is resident:
        on the owner, for its threads' work, raising the error that stopped
        it (SharedSegmentError, errno ENOMEM where memory ran out; the
        pages left are faulted at first touch); on the other ranks, until
        every page is resident or the owner's work ended: the owner's
        error, errno ECANCELED when the owner closed the segment first,
        EOWNERDEAD when the owner exited or was killed. timeout: seconds,
        None for no bound; TimeoutError past it. Ctrl-C interrupts it. Not
        a collective: each rank hears from the owner itself. Any other
        populate mode returns at once. populate_progress() and info work
        from other threads meanwhile; close() from another thread stops
        the wait (it raises SharedSegmentError saying so) and then
        releases the segment."""
        self._open()
        self._native.populate_wait(-1 if timeout is None else _wait_ms(timeout))

    def describe(self) -> str:
        """The canonical layout description that was hashed into the fingerprint."""
        return self._layout.describe() if self._layout is not None else ""

    def buffer(self) -> memoryview:
        """A memoryview over the whole segment (read-only on read-only peers)."""
        self._open()
        return memoryview(self._native)

    # ---- blocks ----

    @property
    def blocks(self) -> Dict[str, Dict[str, Any]]:
        """{name: dict(count=, shape=, dtype=)} as declared (dtype by its canonical name)."""
        return {n: dict(count=b.count, shape=b.shape, dtype=b.dtype)
                for n, b in self._blocks.items()}

    def offsets(self, block: str) -> List[int]:
        """Byte offsets of every entry of block, in index order: what another
        rank needs to find an entry (with the block name and index)."""
        self._block(block)
        return list(self._plan.offsets(block))

    def tensors(self, block: str) -> List[Any]:
        """count zero-copy CPU tensors of the block's shape and dtype (8-bit
        floats as uint8 on a torch without them). Each one keeps the segment
        mapped. On a read-only peer writing through them faults (SIGSEGV):
        the mapping is read-only. share_memory_() on them is a no-op (their
        pages are shared memory already), and torch.multiprocessing refuses
        to send them: it would copy them out of the segment."""
        try:
            import torch
        except ImportError as e:
            raise ImportError("SharedSegment.tensors() needs PyTorch: install torch (pip "
                              "install torch, or apt install python3-torch on Debian), or "
                              "use arrays() with numpy") from e
        b = self._block(block)
        dtype = _dtypes.torch_dtype(b.dtype)
        pin = self._pin()
        _ipc.install()
        with warnings.catch_warnings():
            # A read-only peer's buffer: torch warns that it is not writable.
            warnings.simplefilter("ignore", UserWarning)
            return [torch.frombuffer(pin, dtype=dtype, count=b.numel, offset=off).view(b.shape)
                    for off in self._plan.offsets(block)]

    def arrays(self, block: str, dtype: Any = None) -> List[Any]:
        """count zero-copy numpy arrays over block's entries (read-only on
        read-only peers). dtype: None for the block's own; else a numpy
        dtype of the same item size, to see the bytes as another type.
        bfloat16 and 8-bit floats use ml_dtypes where it is installed; without
        it 8-bit floats are raw uint8 and bfloat16 raises TypeError (pass
        dtype=numpy.uint16 to see those bits)."""
        try:
            import numpy
        except ImportError as e:
            raise ImportError("SharedSegment.arrays() needs numpy: install numpy (pip install "
                              "numpy, or apt install python3-numpy on Debian)") from e
        b = self._block(block)
        if dtype is None:
            dt = _dtypes.numpy_dtype(b.dtype, b.name)
        else:
            dt = numpy.dtype(dtype)
            if dt.itemsize != _dtypes.ITEMSIZE[b.dtype]:
                raise TypeError(f"dtype {dt} is {dt.itemsize} bytes; block '{b.name}' holds "
                                f"{b.dtype}, {_dtypes.ITEMSIZE[b.dtype]} bytes")
        pin = self._pin()
        return [numpy.frombuffer(pin, dtype=dt, count=b.numel, offset=off).reshape(b.shape)
                for off in self._plan.offsets(block)]

    # ---- lifetime ----

    @property
    def closed(self) -> bool:
        """close() was called (views may still hold the pages)."""
        return self._native.closed

    def close(self) -> bool:
        """Releases this rank's segment. Returns True when the pages were
        unmapped now, False when live views hold them (unmapped with the last).
        A wait_populated() running on another thread is stopped first (it
        raises SharedSegmentError); inside it (a signal handler) close()
        returns False and the pages go once the wait has stopped."""
        return self._native.close()

    def __enter__(self) -> "SharedSegment":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"base=0x{self._native.base:x}"
        return (f"<SharedSegment '{self.name}' rank {self.rank}/{self.world_size} "
                f"owner {self.owner_rank} {_size_text(self.total_size())} {self._pages} {state}>")

    def _open(self) -> None:
        if self._native.closed:
            raise SharedSegmentError(f"segment '{self.name}' is closed")

    def _pin(self) -> Any:
        self._open()
        return self._native.pin()

    def _block(self, block: str) -> Block:
        found = self._blocks.get(block)
        if found is None:
            known = ", ".join(self._blocks) or "none: the segment was made with size="
            raise SharedSegmentKeyError(f"segment '{self.name}' has no block {block!r} (blocks: "
                                        f"{known})")
        return found


# The C call takes int milliseconds.
_WAIT_MS_MAX = 2**31 - 1


def _wait_ms(timeout: Any) -> int:
    """timeout seconds as the C call's milliseconds, rounded up (a wait is
    at least as long as asked); ValueError outside 0..2147483.647 s."""
    ms = -1
    if isinstance(timeout, int) and not isinstance(timeout, bool):
        ms = timeout * 1000
    elif isinstance(timeout, float) and math.isfinite(timeout):
        ms = math.ceil(timeout * 1000)
    if not 0 <= ms <= _WAIT_MS_MAX:
        raise ValueError(f"timeout={timeout!r}: seconds from 0 to {_WAIT_MS_MAX / 1000} (the C "
                         f"call waits at most 2**31-1 ms), or None for no bound")
    return ms


def _size_text(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            value = n / (1 << shift)
            return f"{value:.1f} {unit}" if value % 1 else f"{int(value)} {unit}"
    return f"{n} B"
