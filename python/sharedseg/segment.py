"""create_shared_segment and SharedSegment: the two phases of the C library
with the caller's all-gather between them, and zero-copy views over the
result. Layout, validation and fingerprint are the C library's."""
import math
import warnings

from . import _dtypes, _exchange, _group, _native
from ._native import SharedSegmentError

_ORDERS = {"interleaved": _native.LAYOUT_INTERLEAVED, "grouped": _native.LAYOUT_GROUPED}


class _Block:
    __slots__ = ("name", "count", "shape", "dtype", "numel", "align", "offsets")

    def __init__(self, name, spec):
        if isinstance(spec, dict):
            unknown = set(spec) - {"count", "shape", "dtype", "align"}
            if unknown:
                raise TypeError(f"block '{name}': unknown keys {sorted(unknown)}; "
                                f"expected count, shape, dtype and optionally align")
            count, shape, dtype = spec.get("count", 1), spec.get("shape"), spec.get("dtype")
            align = spec.get("align") or 0
        else:
            count, shape, dtype = spec
            align = 0
        if shape is None or dtype is None:
            raise TypeError(f"block '{name}' needs a shape and a dtype")
        self.name = name
        self.count = _whole(count, f"block '{name}': count")
        self.shape = tuple(_whole(d, f"block '{name}': shape")
                           for d in ((shape,) if isinstance(shape, int) else shape))
        self.dtype = _dtypes.dtype_name(dtype)
        self.numel = math.prod(self.shape)
        self.align = _whole(align, f"block '{name}': align", minimum=0)
        self.offsets = None

    def desc(self):
        """The (name, count, bytes, align, shape) the C layout takes."""
        shape_text = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        return (self.name, self.count, self.numel * _dtypes.ITEMSIZE[self.dtype], self.align,
                shape_text)


def _whole(value, what, minimum=1):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    value = value.__index__()
    if value < minimum:
        raise ValueError(f"{what} must be at least {minimum}, got {value}")
    return value


def _parse(kind, value, default):
    text = default if value is None else str(value)
    return _native.parse(kind, text)


class _Plan:
    """Everything decided before phase 1; built inside the setup phase so
    that a mistake on one rank reaches every rank."""

    def __init__(self, name, blocks, opts):
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        self.name = name
        self.blocks = {}
        self.layout = None
        if blocks:
            self.blocks = {str(n): _Block(str(n), spec) for n, spec in dict(blocks).items()}
            order = _ORDERS.get(opts["layout"])
            if order is None:
                raise ValueError(f"layout={opts['layout']!r}: expected "
                                 f"{' or '.join(map(repr, _ORDERS))}")
            align = _whole(opts["align"] or 0, "align", minimum=0)
            self.layout = _native.Layout([b.desc() for b in self.blocks.values()], order, align)
            for b in self.blocks.values():
                b.offsets = self.layout.offsets(b.name)
        size = opts["size"]
        if isinstance(size, str):
            size = _native.parse("size", size)
        size = _whole(size or 0, "size", minimum=0)
        if not size and self.layout is None:
            raise ValueError("give blocks= (a layout) or size= (bytes)")
        numa, numa_node = _parse("numa", opts["numa"], "none")
        self.create_args = dict(
            size=size, layout=self.layout,
            backend=_parse("backend", opts["backend"], "auto"),
            pages=_parse("pages", opts["pages"], "auto"),
            numa=numa, numa_node=numa_node,
            populate=_parse("populate", opts["populate"], "owner"),
            populate_threads=_whole(opts["populate_threads"], "populate_threads", minimum=0),
            readonly_peers=bool(opts["readonly_peers"]),
            host_register=bool(opts["host_register"]),
            device=_whole(opts["device"], "device_id", minimum=0),
            timeout_ms=0 if opts["timeout"] is None else max(1, int(opts["timeout"] * 1000)),
        )


def _device(device_id):
    """The GPU for the CUDA paths: device_id, else torch's current CUDA
    device when torch has one, else 0."""
    if device_id is not None:
        return device_id
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.current_device()
    except ImportError:
        pass
    return 0


def _pick_group(comm_group, tp_group):
    if comm_group is not None and tp_group is not None and comm_group is not tp_group:
        raise ValueError("comm_group= and tp_group= name different groups; tp_group is an "
                         "alias of comm_group: pass one of them")
    return comm_group if comm_group is not None else tp_group


def _policy(mmap, hugetlb, pages, backend):
    """The issue's compatibility switches, mapped onto our own options."""
    if not mmap:
        if backend not in (None, "auto", "cuda"):
            raise ValueError(f"mmap=False selects the CUDA VMM backend, not backend={backend!r}")
        backend = "cuda"
    if hugetlb:
        if pages not in (None, "auto") and not str(pages).lower().startswith("hugetlb"):
            raise ValueError(f"hugetlb=True asks for HugeTLB pages, not pages={pages!r}")
        pages = pages if pages not in (None, "auto") else "hugetlb-2M"
    return pages, backend


def _owner(owner_rank, ids, world_size, rank, backend):
    """Each host's lowest rank, unless owner_rank is on this rank's host.
    With the CUDA backend owner_rank serves every rank: a fabric handle
    crosses hosts of one NVLink domain (the C library refuses the group,
    naming the hosts, when only fd handles could be made)."""
    if owner_rank is not None and (ids[owner_rank] == ids[rank] or str(backend).lower() == "cuda"):
        return owner_rank
    return _native.host_owner(b"".join(ids), world_size, rank)


def create_shared_segment(name, blocks=None, *, world_size=1, rank_id=0, tp_group=None,
                          comm_group=None, owner_rank=None, device_id=None, mmap=True,
                          host_register=False, hugetlb=False, pages=None, numa=None,
                          populate=None, backend=None, layout="interleaved", align=None,
                          exchange=None, timeout=30.0, size=None, readonly_peers=False,
                          populate_threads=0):
    """Creates one segment shared by world_size ranks; every rank calls it.

    Raises ValueError/TypeError for arguments that decide how the ranks talk
    (world_size, rank_id, the group), and SharedSegmentError, on every rank
    alike, for anything that fails once they can talk.
    """
    group = _pick_group(comm_group, tp_group)
    world_size = _whole(world_size, "world_size")
    rank = _whole(rank_id, "rank_id", minimum=0)
    if rank >= world_size:
        raise ValueError(f"rank_id={rank} is outside 0..{world_size - 1}")
    pages, backend = _policy(mmap, hugetlb, pages, backend)
    gather = _exchange.resolve(group, exchange, world_size, timeout)
    opts = dict(layout=layout, align=align, size=size, numa=numa, backend=backend, pages=pages,
                populate=populate, populate_threads=populate_threads,
                readonly_peers=readonly_peers, host_register=host_register, timeout=timeout,
                device=_device(device_id))
    plan, status = None, _group.Status()
    try:
        if owner_rank is not None:
            _whole(owner_rank, "owner_rank", minimum=0)
            if owner_rank >= world_size:
                raise ValueError(f"owner_rank={owner_rank} is outside 0..{world_size - 1}")
        if gather is not None:
            problem = gather.check(world_size, rank)
            if problem:
                raise ValueError(problem)
        plan = _Plan(name, blocks, opts)
        status.host_id = _native.host_identity()
    except Exception as e:
        status = _group.Status.failed("setup", e)
    seg_name = name if isinstance(name, str) else repr(name)
    if gather is None:
        _raise_if_failed(seg_name, [status])
        owner = 0
    else:
        statuses = _group.agree(gather, world_size, "setup status", status)
        _raise_if_failed(seg_name, statuses)
        owner = _owner(owner_rank, [s.host_id for s in statuses], world_size, rank, backend)
    native = _establish(plan, gather, world_size, rank, owner)
    return SharedSegment(native, plan, world_size, rank, device_id)


def _establish(plan, gather, world_size, rank, owner):
    native, blob, errno, message = _native.create(plan.name, world_size, rank, owner,
                                                  **plan.create_args)
    status = _group.Status() if native else _group.Status(False, "create", errno, message)
    try:
        blobs = [blob] if gather is None else _group.gather(gather, world_size, "blobs", blob)
        if native is not None:
            try:
                native.complete(b"".join(blobs))
            except SharedSegmentError as e:
                status = _group.Status.failed("complete", e)
        statuses = [status] if gather is None else \
            _group.agree(gather, world_size, "complete status", status)
        _raise_if_failed(plan.name, statuses)
    except BaseException:
        if native is not None:
            native.close()
        raise
    return native


def _raise_if_failed(name, statuses):
    err = _group.failure(name, statuses)
    if err is not None:
        raise err


class SharedSegment:
    """One rank's mapping of the group's segment.

    Views (tensors(), arrays(), buffer()) keep the pages mapped: close() or
    dropping this object unmaps them only once the last view is gone.
    """

    def __init__(self, native, plan, world_size, rank, device_id):
        self._native = native
        self._blocks = plan.blocks
        self._layout = plan.layout
        self.name = plan.name
        self.world_size = world_size
        self.rank = rank
        self.device_id = device_id
        facts = native.info()
        self.owner_rank = facts["owner_rank"]
        self.is_owner = facts["is_owner"]
        self.readonly = native.readonly

    # ---- the whole segment ----

    def base_addr(self):
        """This rank's address of the segment's first byte."""
        self._open()
        return self._native.base

    def total_size(self):
        """The segment's size in bytes (the layout's, or size=)."""
        return self._native.size

    def device_addr(self):
        """The device address of the segment: of the registered mapping
        (host_register=True) or of the CUDA VMM mapping (mmap=False); None
        when the segment has none."""
        return self.info["device_addr"] or None

    @property
    def info(self):
        """What the C library reports: backend, page kind and size obtained,
        huge bytes, NUMA nodes found, timings, and why these pages."""
        self._open()
        return self._native.info()

    def describe(self):
        """The canonical layout description that was hashed into the fingerprint."""
        return self._layout.describe() if self._layout is not None else ""

    def buffer(self):
        """A memoryview over the whole segment (read-only on read-only peers)."""
        self._open()
        return memoryview(self._native)

    # ---- blocks ----

    @property
    def blocks(self):
        return {n: dict(count=b.count, shape=b.shape, dtype=b.dtype)
                for n, b in self._blocks.items()}

    def offsets(self, block):
        """Byte offsets of every entry of block, in index order."""
        return list(self._block(block).offsets)

    def tensors(self, block):
        """count zero-copy CPU tensors of the block's shape and dtype. Each one
        keeps the segment mapped. On a read-only peer writing through them
        faults (SIGSEGV): the mapping is read-only."""
        try:
            import torch
        except ImportError as e:
            raise ImportError("SharedSegment.tensors() needs PyTorch: install torch (pip "
                              "install torch, or apt install python3-torch on Debian), or "
                              "use arrays() with numpy") from e
        b = self._block(block)
        dtype = _dtypes.torch_dtype(b.dtype)
        pin = self._pin()
        with warnings.catch_warnings():
            # A read-only peer's buffer: torch warns that it is not writable.
            warnings.simplefilter("ignore", UserWarning)
            return [torch.frombuffer(pin, dtype=dtype, count=b.numel, offset=off).view(b.shape)
                    for off in b.offsets]

    def arrays(self, block, dtype=None):
        """count zero-copy numpy arrays (read-only on read-only peers). numpy
        has no bfloat16: pass dtype=numpy.uint16 to see those bits."""
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
                for off in b.offsets]

    # ---- lifetime ----

    @property
    def closed(self):
        return self._native.closed

    def close(self):
        """Releases this rank's segment. Returns True when the pages were
        unmapped now, False when live views hold them (unmapped with the last)."""
        return self._native.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self.closed else f"base=0x{self._native.base:x}"
        return (f"<SharedSegment '{self.name}' rank {self.rank}/{self.world_size} "
                f"owner {self.owner_rank} size {self.total_size()} {state}>")

    def _open(self):
        if self._native.closed:
            raise SharedSegmentError(f"segment '{self.name}' is closed")

    def _pin(self):
        self._open()
        return self._native.pin()

    def _block(self, block):
        found = self._blocks.get(block)
        if found is None:
            known = ", ".join(self._blocks) or "none: the segment was made with size="
            raise KeyError(f"segment '{self.name}' has no block {block!r} (blocks: {known})")
        return found
