# SPDX-License-Identifier: Apache-2.0
"""create_shared_segment and SharedSegment: the two phases of the C library
with the caller's all-gather between them, and zero-copy views over the
result. Layout, validation and fingerprint are the C library's."""
import math
import sys
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from . import _dtypes, _exchange, _ipc, _log, _native, _options
from ._group import Status, failure
from ._native import SharedSegmentError
from ._options import U64_MAX, whole

_ORDERS = {"interleaved": _native.LAYOUT_INTERLEAVED, "grouped": _native.LAYOUT_GROUPED}

BlockSpec = Union[Mapping[str, Any], Tuple[int, Any, Any]]


class _Block:
    __slots__ = ("name", "count", "shape", "dtype", "numel", "entry_bytes", "align")

    def __init__(self, name: Any, spec: BlockSpec):
        if not isinstance(name, str):
            raise TypeError(f"block names are str, not {type(name).__name__} ({name!r})")
        if isinstance(spec, Mapping):
            unknown = set(spec) - {"count", "shape", "dtype", "align"}
            if unknown:
                raise TypeError(f"block '{name}': unknown keys {sorted(unknown)}; "
                                f"expected count, shape, dtype and optionally align")
            count, shape, dtype = spec.get("count", 1), spec.get("shape"), spec.get("dtype")
            align = spec.get("align") or 0
        elif isinstance(spec, (tuple, list)) and len(spec) == 3:
            count, shape, dtype = spec
            align = 0
        else:
            raise TypeError(f"block '{name}': expected dict(count=, shape=, dtype=) or "
                            f"(count, shape, dtype), not {spec!r}")
        if shape is None or dtype is None:
            raise TypeError(f"block '{name}' needs a shape and a dtype")
        self.name = name
        self.count = whole(count, f"block '{name}': count")
        dims = (shape,) if hasattr(shape, "__index__") else tuple(shape)
        self.shape = tuple(whole(d, f"block '{name}': shape") for d in dims)
        self.dtype = _dtypes.dtype_name(dtype)
        self.numel = math.prod(self.shape)
        # Python ints do not wrap: refuse what 64 bits cannot hold before
        # the C library sees it.
        self.entry_bytes = self.numel * _dtypes.ITEMSIZE[self.dtype]
        if self.entry_bytes > U64_MAX or self.count * self.entry_bytes > U64_MAX:
            raise ValueError(
                f"block '{name}': {self.count} x {self.shape} {self.dtype} is "
                f"{self.count * self.entry_bytes} bytes, more than 2**64-1")
        self.align = whole(align, f"block '{name}': align", minimum=0)

    def desc(self) -> Tuple[str, int, int, int, str]:
        """The (name, count, bytes, align, shape) the C layout takes."""
        shape_text = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        return (self.name, self.count, self.entry_bytes, self.align, shape_text)


def _name_text(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"name {name!r} cannot be UTF-8 (a lone surrogate at index "
                         f"{e.start}): the C library takes UTF-8 bytes") from None
    if "\0" in name:
        raise ValueError(f"name {name!r} holds a NUL character: the C library takes a C string")
    return name


class _Plan:
    """Everything decided before phase 1; built inside the setup phase so
    that a mistake on one rank reaches every rank."""

    def __init__(self, name: Any, blocks: Optional[Mapping[str, BlockSpec]], a: Dict[str, Any],
                 world_size: int):
        self.name = _name_text(name)
        self.blocks: Dict[str, _Block] = {}
        self.layout = None
        self._offsets: Dict[str, List[int]] = {}
        if blocks:
            if not isinstance(blocks, Mapping):
                raise TypeError(f"blocks must be a dict of name -> spec, not "
                                f"{type(blocks).__name__}")
            self.blocks = {n: _Block(n, spec) for n, spec in blocks.items()}
            order = _ORDERS.get("interleaved" if a["layout"] is None else a["layout"])
            if order is None:
                raise ValueError(f"layout={a['layout']!r}: expected "
                                 f"{' or '.join(map(repr, _ORDERS))}")
            align = whole(a["align"] or 0, "align", minimum=0)
            self.layout = _native.Layout([b.desc() for b in self.blocks.values()], order, align)
        else:
            for arg in ("layout", "align"):
                if a[arg] is not None:
                    raise ValueError(f"{arg}={a[arg]!r} places blocks, and this segment has "
                                     f"none: give blocks=, or leave {arg} out")
        size = _options.size_bytes(a["size"])
        if not size and self.layout is None:
            raise ValueError("give blocks= (a layout) or size= (bytes)")
        settings = {k: _options.setting(k, a[k]) for k in ("pages", "numa", "populate")}
        if a["hugetlb"]:
            if a["pages"] in (None, "auto"):
                settings["pages"] = ("hugetlb-2M", "argument (hugetlb=True)")
            elif not str(a["pages"]).lower().startswith("hugetlb"):
                raise ValueError(f"hugetlb=True asks for HugeTLB pages, not "
                                 f"pages={a['pages']!r}")
        pages_value = _options.parse("pages", *settings["pages"])
        numa, numa_node = _options.parse("numa", *settings["numa"])
        populate_value = _options.parse("populate", *settings["populate"])
        backend = _native.parse("backend", "auto" if a["backend"] is None else str(a["backend"]))
        self.backend_name = _native.name("backend", backend)
        self.host_register = bool(a["host_register"])
        numa_word = _native.name("numa", numa)
        needs_device = (self.backend_name == "cuda" or self.host_register or
                        numa_word == "device-local")
        device = _device(a["device_id"], needs_device)
        timeout_s, timeout_from = _options.timeout_seconds(a["timeout"])
        declared = max(size, self.layout.size if self.layout is not None else 0)
        allowance = _options.population_allowance(
            declared, _native.name("pages", pages_value), _native.name("populate", populate_value))
        self.wait_s = min(timeout_s + allowance, float(_options.TIMEOUT_MAX_S))
        settings["timeout"] = (timeout_s, timeout_from)
        settings["populate_allowance"] = (round(allowance, 3), "size and page kind")
        self.settings = _options.describe_settings(settings)
        self.create_args = dict(
            size=size, layout=self.layout, backend=backend, pages=pages_value,
            numa=numa, numa_node=numa_node, populate=populate_value,
            populate_threads=whole(a["populate_threads"], "populate_threads", minimum=0,
                                   maximum=256),
            readonly_peers=bool(a["readonly_peers"]), host_register=self.host_register,
            device=device, timeout_ms=max(1, int(self.wait_s * 1000)))
        self.device = device
        owner_rank = _options.optional_index(a["owner_rank"], "owner_rank")
        if owner_rank is not None and owner_rank >= world_size:
            raise ValueError(f"owner_rank={owner_rank} is outside 0..{world_size - 1}")
        self.owner_rank = owner_rank

    def offsets(self, block: str) -> List[int]:
        found = self._offsets.get(block)
        if found is None:
            found = self._offsets[block] = self.layout.offsets(block)
        return found


def _device(device_id: Any, needed: bool) -> int:
    """The GPU for the CUDA paths: device_id, else torch's current CUDA
    device when torch already initialised CUDA, else 0. Nothing here
    initialises CUDA (a process that did not ask for it must stay
    fork-safe): torch.cuda is read only when the segment needs a device and
    torch.cuda.is_initialized() says CUDA is up."""
    if device_id is not None:
        return whole(device_id, "device_id", minimum=0, maximum=2 ** 31 - 1)
    torch = sys.modules.get("torch")
    if needed and torch is not None and torch.cuda.is_initialized():
        return int(torch.cuda.current_device())
    return 0


# The torch device modules whose copies may read or write a pinned segment:
# torch.cuda (NVIDIA) and torch.npu (torch_npu, Ascend), which mirror each
# other's API.
_DEVICE_MODULES = ("cuda", "npu")


def _quiesce(device: int) -> Callable[[], None]:
    """Run before a pinned segment's pages go: no device copy may still be
    reading or writing them (a non_blocking copy returns before its DMA
    ends). Synchronises the current device and the segment's of every
    torch device module already initialised; work on other devices is the
    caller's to synchronise. Nothing to do where torch initialised none:
    then no copy of torch's can be in flight."""
    def quiesce() -> None:
        torch = sys.modules.get("torch")
        for name in _DEVICE_MODULES:
            module = getattr(torch, name, None) if torch is not None else None
            initialised = getattr(module, "is_initialized", None)
            if initialised is None or not initialised():
                continue
            for d in sorted({device, int(module.current_device())}):
                module.synchronize(d)
    return quiesce


def _pick_group(comm_group: Any, tp_group: Any) -> Tuple[Any, Optional[Exception]]:
    """The group to talk over, and the mistake of naming two: comm_group
    is used all the same, so that the mistake reaches every rank in setup."""
    if comm_group is not None and tp_group is not None and comm_group is not tp_group:
        return comm_group, ValueError("comm_group= and tp_group= name different groups; "
                                      "tp_group is an alias of comm_group: pass one of them")
    return (comm_group if comm_group is not None else tp_group), None


def _policy(mmap: bool, backend: Any) -> Any:
    """mmap=False is a device backend's VMM host memory: CUDA's, or
    Ascend's where an Ascend runtime is present and CUDA is not."""
    if not mmap:
        if backend not in (None, "auto", "cuda", "ascend"):
            raise ValueError(f"mmap=False selects a device backend's VMM memory (cuda, "
                             f"ascend), not backend={backend!r}")
        if backend in (None, "auto"):
            backend = "cuda"
            if not supported_backend("cuda") and supported_backend("ascend"):
                backend = "ascend"
    return backend


def supported_backend(name: str) -> bool:
    ok, _ = _native.supported(_native.parse("backend", name), _native.parse("pages", "auto"))
    return bool(ok)


def _owner(owner_rank: Optional[int], ids: List[bytes], world_size: int, rank: int,
           backend: str) -> int:
    """Each host's lowest rank, unless owner_rank is on this rank's host.
    With a device backend (cuda, ascend) owner_rank serves every rank: a
    fabric handle crosses hosts (the C library refuses the group, naming the
    hosts, when only in-host handles could be made)."""
    if owner_rank is not None and (ids[owner_rank] == ids[rank] or
                                   str(backend).lower() in ("cuda", "ascend")):
        return owner_rank
    return _native.host_owner(b"".join(ids), world_size, rank)


def _talk(link: _exchange.Link, world_size: Any, rank_id: Any) -> Tuple[int, int]:
    """The size and rank the exchange runs with: the group's own when it
    has them, else (a callable exchange) world_size and rank_id, checked
    here, on this rank, since the ranks cannot talk without them."""
    if link.size is not None:
        return link.size, link.rank
    if world_size is None:
        raise ValueError("an exchange callable needs world_size= (and rank_id=): it cannot "
                         "tell them")
    size = whole(world_size, "world_size", maximum=65536)
    if rank_id is None and size > 1:
        raise ValueError(f"world_size={size} with an exchange callable needs rank_id=")
    rank = whole(rank_id or 0, "rank_id", minimum=0)
    if rank >= size:
        raise ValueError(f"rank_id={rank} is outside 0..{size - 1}")
    return size, rank


def _check_ranks(world_size: Any, rank_id: Any, link: _exchange.Link, size: int,
                 rank: int) -> None:
    """world_size and rank_id, when given, must be the group's."""
    if world_size is not None:
        given = whole(world_size, "world_size")
        if given != size:
            raise ValueError(f"world_size={given}, but {link.what} has {size} ranks")
    if rank_id is not None:
        given = whole(rank_id, "rank_id", minimum=0)
        if given != rank:
            raise ValueError(f"rank_id={given}, but this process is rank {rank} of "
                             f"{link.what}")


def _agree(link: _exchange.Link, label: str, status: Status, wait_s: float,
           size: int) -> List[Status]:
    got = _exchange.gather(link, label, status.encode(), wait_s, size)
    return [Status.decode(r, raw) for r, raw in enumerate(got)]


def _raise_if_failed(link: _exchange.Link, name: str, statuses: List[Status]) -> None:
    """Every rank raises the same error here, having read every round."""
    err = failure(name, statuses)
    if err is not None:
        err.agreed = True
        link.close_call()
        raise err


def create_shared_segment(
        name: str,
        blocks: Optional[Mapping[str, BlockSpec]] = None,
        *,
        world_size: Optional[int] = None,
        rank_id: Optional[int] = None,
        tp_group: Any = None,
        comm_group: Any = None,
        exchange: Optional[Callable[[bytes], List[bytes]]] = None,
        owner_rank: Optional[int] = None,
        size: Union[int, str, None] = None,
        pages: Optional[str] = None,
        hugetlb: bool = False,
        numa: Union[str, int, None] = None,
        populate: Optional[str] = None,
        populate_threads: int = 0,
        layout: Optional[str] = None,
        align: Optional[int] = None,
        readonly_peers: bool = False,
        backend: Optional[str] = None,
        mmap: bool = True,
        host_register: bool = False,
        device_id: Optional[int] = None,
        timeout: Any = None) -> "SharedSegment":
    """Creates one segment shared by every rank of a group; every rank calls
    it with the same declaration, and every rank gets a SharedSegment over
    the same bytes. Over a group's Store (a torch.distributed group that
    has one, a vLLM or SGLang coordinator, a StatelessProcessGroup) calls
    pair up by name: the n-th call for a name on each rank meets the n-th
    on every other, so calls for different names may run at once, from
    several threads, in any order. Over a collective (a group without a
    Store, an mpi4py communicator) calls pair up by their order: one
    process makes one at a time per group (another thread's call waits for
    it, up to its timeout), and every rank must make them in the same
    order. Calls that pair up wrongly fail with the declaration they differ
    in, on every rank. An exchange callable pairs as the caller makes it.

    Args:
        name: the segment's name (1 to 63 bytes of UTF-8); it names the memfd
            ("sseg:NAME" in /proc/PID/maps) and enters the fingerprint.
        blocks: {block name: dict(count=, shape=, dtype=, align=None)} or
            {name: (count, shape, dtype)}: count entries of shape and dtype each.
            dtype is a torch or numpy dtype or a name ("bfloat16", "bf16",
            "float8_e4m3fn", "fp8", "f32", ...). The C library lays them out.
        world_size: ranks in the group; default: the group's size (1 without
            a group). Given and different from the group's: ValueError.
        rank_id: this process's rank in the group; default: the group's rank.
        tp_group: alias of comm_group.
        comm_group: the group: a torch.distributed ProcessGroup (registered
            or not, any backend), a c10d backend such as ProcessGroupGloo, a
            vLLM or SGLang GroupCoordinator (its cpu_group is used), a vLLM
            StatelessProcessGroup, an mpi4py communicator, or a callable like
            exchange. None: no group for world_size 1, else the default
            torch.distributed group when it has exactly world_size ranks.
        exchange: a callable exchange(my_bytes) -> [bytes of rank 0, 1, ...]
            instead of a group (needs world_size and rank_id).
        owner_rank: the rank that allocates its host's copy; default: each
            host's lowest rank.
        size: bytes (4096, "256MiB") for a segment without blocks, or more
            than the blocks need.
        pages: "auto", "base", "thp", "hugetlb" (2 MiB), "hugetlb-2M",
            "hugetlb-1G"; default: $SHAREDSEG_PAGES, else "auto".
        hugetlb: True asks for "hugetlb-2M" when pages is not given.
        numa: "none", a node number, "interleave", "device-local"; default:
            $SHAREDSEG_NUMA, else "none".
        populate: "owner" (the owner faults every page in create), "spread"
            (each rank faults its slice in complete), "lazy", "background"
            (complete returns once every rank has mapped; the owner's
            threads then fault every page in while the segment is in use:
            see wait_populated()); default: $SHAREDSEG_POPULATE, else
            "owner".
        populate_threads: the owner's population threads (0: up to 4).
        layout: "interleaved" (index 0 of every block, then index 1, ...) or
            "grouped"; only with blocks.
        align: every entry's alignment (a power of two; default 4096); only
            with blocks.
        readonly_peers: peers map the segment read-only; only the owner writes.
        backend: "auto", "memfd", "cuda" (CUDA VMM host memory), "ascend".
        mmap: False selects a device backend's VMM host memory: cuda, or ascend
            where an Ascend runtime is present and CUDA is not.
        host_register: pin each rank's mapping for device DMA (cuMemHostRegister, or
            aclrtHostRegister where only the ACL runtime is usable).
        device_id: the GPU for the CUDA paths; default: torch's current CUDA
            device when torch already initialised CUDA, else 0. CUDA is never
            initialised for a memfd segment without host_register.
        timeout: how long a rank waits for the others at each step (seconds,
            or a datetime.timedelta); None or 0: 30 s. The declared
            population's expected time is added to it (2 s per GiB on base
            or auto pages, 1 s per GiB on huge pages; none for "lazy"), so
            the owner's first touch does not count against its peers.

    Returns:
        This rank's SharedSegment.

    Raises:
        ValueError, TypeError: at once, on this rank, for what decides how
            the ranks talk (an object that is no group, no group for
            world_size > 1, world_size/rank_id with a callable).
        SharedSegmentValueError, SharedSegmentTypeError (subclasses of
            SharedSegmentError and of ValueError/TypeError): on every rank
            alike, for an argument one rank got wrong or ranks disagree on.
        SharedSegmentError: on every rank alike for the rest; errno is set
            (errno.ETIMEDOUT when a rank did not arrive, naming it).
    """
    group, mistake = _pick_group(comm_group, tp_group)
    link = _exchange.resolve(group, exchange, world_size)
    mistake = mistake or link.mistake
    size_n, rank = _talk(link, world_size, rank_id)
    seg_name = name if isinstance(name, str) else repr(name)
    _log.sync_level()
    plan, status, wait_s = None, Status(), _wait_seconds(timeout)
    try:
        _exchange.open_call(link, seg_name, wait_s)
        try:
            _options.timeout_seconds(timeout)  # a mistake in it: every rank's error
            if mistake is not None:
                raise mistake
            _check_ranks(world_size, rank_id, link, size_n, rank)
            plan = _Plan(name, blocks, dict(
                layout=layout, align=align, size=size, pages=pages, hugetlb=hugetlb, numa=numa,
                populate=populate, populate_threads=populate_threads, backend=_policy(
                    mmap, backend), readonly_peers=readonly_peers,
                host_register=host_register, device_id=device_id, timeout=timeout,
                owner_rank=owner_rank), size_n)
            status.host_id = _native.host_identity()
        except Exception as e:
            status = Status.failed("setup", e)
        statuses = _agree(link, "setup", status, wait_s, size_n)
        _raise_if_failed(link, seg_name, statuses)
        owner = _owner(plan.owner_rank, [s.host_id for s in statuses], size_n, rank,
                       plan.backend_name)
        native, facts = _establish(plan, link, size_n, rank, owner)
    except BaseException as e:
        _exchange.abandon(link, rank, e)
        raise
    finally:
        link.end_call()
    return SharedSegment(native, plan, size_n, rank, facts)


def _wait_seconds(timeout: Any) -> float:
    """timeout= in seconds, or the default where it is a mistake (which
    setup then reports to every rank)."""
    try:
        return _options.timeout_seconds(timeout)[0]
    except (TypeError, ValueError):
        return _options.DEFAULT_TIMEOUT_S


def _establish(plan: _Plan, link: _exchange.Link, size: int, rank: int,
               owner: int) -> Tuple[Any, Dict[str, Any]]:
    """The completed native segment and its sseg_info, read once (on THP
    pages it reads /proc/self/smaps)."""
    native, blob, err, message = _native.create(plan.name, size, rank, owner,
                                                **plan.create_args)
    status = Status() if native else Status(False, "create", err, message)
    try:
        blobs = _exchange.gather(link, "blobs", blob, plan.wait_s, size)
        if native is not None:
            try:
                native.complete(b"".join(blobs), link.watch())
            except SharedSegmentError as e:
                status = Status.failed("complete", e)
        _raise_if_failed(link, plan.name, _agree(link, "complete", status, plan.wait_s, size))
        link.close_call()
    except BaseException:
        if native is not None:
            native.close()
        raise
    facts = native.info()
    if plan.host_register or facts.get("pinned"):
        native.set_quiesce(_quiesce(plan.device))
    return native, facts


class SharedSegment:
    """One rank's mapping of the group's segment.

    Views (tensors(), arrays(), buffer()) keep the pages mapped: close() or
    dropping this object unmaps them only once the last view is gone. With
    host_register=True (or a pinned backend: cuda, ascend) the device is
    synchronised before the pages go (torch.cuda, or torch.npu where
    torch_npu is loaded), so a non_blocking copy still running on torch's
    current device or on device_id cannot outlive them.
    """

    def __init__(self, native: Any, plan: _Plan, world_size: int, rank: int,
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
        timings, why these pages, pinned, memfd_name; and "settings": the
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
        it (SharedSegmentError, errno ENOMEM where the kernel refused
        pages; the pages left are faulted at first touch); on the
        other ranks, until every page is resident. timeout: seconds, None
        for no bound; TimeoutError past it. Ctrl-C interrupts it. Not a
        collective: a peer does not learn of the owner's error here, so
        all-gather the owner's outcome if every rank must. Any other
        populate mode returns at once."""
        self._open()
        if timeout is None:
            ms = -1
        else:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
                    not 0 <= timeout <= 2**31 / 1000:
                raise ValueError(f"timeout={timeout!r}: seconds, 0..{2**31 // 1000}, or None")
            ms = int(timeout * 1000)
        self._native.populate_wait(ms)

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
        unmapped now, False when live views hold them (unmapped with the last)."""
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

    def _block(self, block: str) -> _Block:
        found = self._blocks.get(block)
        if found is None:
            known = ", ".join(self._blocks) or "none: the segment was made with size="
            raise KeyError(f"segment '{self.name}' has no block {block!r} (blocks: {known})")
        return found


def _size_text(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            value = n / (1 << shift)
            return f"{value:.1f} {unit}" if value % 1 else f"{int(value)} {unit}"
    return f"{n} B"
