# SPDX-License-Identifier: Apache-2.0
"""The option plan: everything a rank decides before phase 1 (its blocks
and their layout, page kind, placement, population, backend, device, waits,
owner_rank), from the arguments and the operators' environment. Built in
the setup phase, so that a mistake on one rank reaches every rank."""
import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from . import _backends, _dtypes, _native, _options
from ._options import U64_MAX, whole

_ORDERS = {"interleaved": _native.LAYOUT_INTERLEAVED, "grouped": _native.LAYOUT_GROUPED}

BlockSpec = Union[Mapping[str, Any], Tuple[int, Any, Any]]


class Block:
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


class Plan:
    """Everything decided before phase 1, checked in the order a caller
    reads the arguments: the first mistake is the one reported."""

    def __init__(self, name: Any, blocks: Optional[Mapping[str, BlockSpec]], a: Dict[str, Any],
                 world_size: int):
        self.name = _name_text(name)
        self.blocks, self.layout = _declare(blocks, a["layout"], a["align"])
        self._offsets: Dict[str, List[int]] = {}
        size = _options.size_bytes(a["size"])
        if not size and self.layout is None:
            raise ValueError("give blocks= (a layout) or size= (bytes)")
        settings = _settings(a)
        pages = _options.parse("pages", *settings["pages"])
        numa, numa_node = _options.parse("numa", *settings["numa"])
        populate = _options.parse("populate", *settings["populate"])
        backend = _native.parse("backend", "auto" if a["backend"] is None else str(a["backend"]))
        self.backend_name = _native.name("backend", backend)
        self.host_register = bool(a["host_register"])
        self.device = _device(a["device_id"], lambda: (
            self.host_register or _native.name("numa", numa) == "device-local" or
            _backends.is_device_backend(self.backend_name)))
        self.wait_s = self._waits(settings, a["timeout"], size, pages, populate)
        self.settings = _options.describe_settings(settings)
        self.create_args = dict(
            size=size, layout=self.layout, backend=backend, pages=pages,
            numa=numa, numa_node=numa_node, populate=populate,
            populate_threads=whole(a["populate_threads"], "populate_threads", minimum=0,
                                   maximum=256),
            readonly_peers=bool(a["readonly_peers"]), host_register=self.host_register,
            device=self.device, timeout_ms=max(1, int(self.wait_s * 1000)))
        if a.get("keeper") is not None:
            if not isinstance(a["keeper"], str):
                raise TypeError(f"keeper must be a str, not {type(a['keeper']).__name__}")
            self.create_args["keeper"] = a["keeper"]
        self.owner_rank = _owner_rank(a["owner_rank"], world_size)

    def _waits(self, settings: Dict[str, Tuple[Any, str]], timeout: Any, size: int,
               pages: Any, populate: Any) -> float:
        """Every wait: the timeout plus the declared population's allowance."""
        timeout_s, timeout_from = _options.timeout_seconds(timeout)
        declared = max(size, self.layout.size if self.layout is not None else 0)
        allowance = _options.population_allowance(declared, pages, populate)
        settings["timeout"] = (timeout_s, timeout_from)
        settings["populate_allowance"] = (round(allowance, 3), "size and page kind")
        return min(timeout_s + allowance, float(_options.TIMEOUT_MAX_S))

    def offsets(self, block: str) -> List[int]:
        found = self._offsets.get(block)
        if found is None:
            found = self._offsets[block] = self.layout.offsets(block)
        return found


def _declare(blocks: Optional[Mapping[str, BlockSpec]], layout: Any,
             align: Any) -> Tuple[Dict[str, Block], Any]:
    """The blocks and the C library's layout of them (None without blocks)."""
    if not blocks:
        for arg, value in (("layout", layout), ("align", align)):
            if value is not None:
                raise ValueError(f"{arg}={value!r} places blocks, and this segment has "
                                 f"none: give blocks=, or leave {arg} out")
        return {}, None
    if not isinstance(blocks, Mapping):
        raise TypeError(f"blocks must be a dict of name -> spec, not {type(blocks).__name__}")
    declared = {n: Block(n, spec) for n, spec in blocks.items()}
    order = _ORDERS.get("interleaved" if layout is None else layout)
    if order is None:
        raise ValueError(f"layout={layout!r}: expected {' or '.join(map(repr, _ORDERS))}")
    align = whole(align or 0, "align", minimum=0)
    return declared, _native.Layout([b.desc() for b in declared.values()], order, align)


def _settings(a: Dict[str, Any]) -> Dict[str, Tuple[Any, str]]:
    """(text, where from) of pages, numa and populate; hugetlb=True is pages'."""
    settings = {k: _options.setting(k, a[k]) for k in ("pages", "numa", "populate")}
    if a["hugetlb"]:
        if a["pages"] in (None, "auto"):
            settings["pages"] = ("hugetlb-2M", "argument (hugetlb=True)")
        elif not str(a["pages"]).lower().startswith("hugetlb"):
            raise ValueError(f"hugetlb=True asks for HugeTLB pages, not pages={a['pages']!r}")
    return settings


def _device(device_id: Any, needed: Callable[[], bool]) -> int:
    """The device for the device paths: device_id, else torch's current
    device where torch already initialised it and needed() (host
    registration, numa="device-local", a device backend), else 0."""
    if device_id is not None:
        return whole(device_id, "device_id", minimum=0, maximum=2 ** 31 - 1)
    return _backends.current_device(needed)


def _owner_rank(owner_rank: Any, world_size: int) -> Optional[int]:
    owner_rank = _options.optional_index(owner_rank, "owner_rank")
    if owner_rank is not None and owner_rank >= world_size:
        raise ValueError(f"owner_rank={owner_rank} is outside 0..{world_size - 1}")
    return owner_rank
