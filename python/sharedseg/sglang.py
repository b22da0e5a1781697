# SPDX-License-Identifier: Apache-2.0
"""SGLang's HiCache host pool in one sharedseg segment per TP group.

SGLang builds a host pool per TP rank (HostKVCache asks
get_allocator_from_storage(allocator_type) for a HostTensorAllocator and
calls allocate(dims, dtype, device)); for MLA models every rank's pool holds
the same bytes. SharedSegHostTensorAllocator returns, on every rank, a
tensor over one segment of the group instead. SGLang has no allocator
registry, so install() replaces get_allocator_from_storage in the modules
that imported it by name, in one place, after checking the version:

    import sharedseg.sglang
    sharedseg.sglang.install()   # before SGLang builds its host pools

uninstall() puts SGLang's own back. Every allocate() is a collective over
the group: the ranks build their pools in the same order (SGLang's TP
ranks run the same scheduler), and ranks that disagree on a pool's shape
get the library's agreed error, never a hang.

Importing sharedseg never imports this module; this module imports SGLang.
"""
import importlib
import itertools
from typing import Any, Callable, Dict, List, Optional

import sglang

from . import create_shared_segment
from ._offload import segment_args

TESTED = ("0.5.23",)
# The modules of sglang.srt.mem_cache that call get_allocator_from_storage
# by the name they imported (0.5.23).
USERS = (
    "sglang.srt.mem_cache.pool_host.base",
    "sglang.srt.mem_cache.pool_host.mha",
    "sglang.srt.mem_cache.pool_host.mamba",
    "sglang.srt.mem_cache.pool_host.unified",
    "sglang.srt.mem_cache.pool_host.dsa",
    "sglang.srt.mem_cache.pool_host.minimax_m3_nvfp4",
    "sglang.srt.mem_cache.memory_pool_host",
)
_COMMON = "sglang.srt.mem_cache.pool_host.common"


def _common() -> Any:
    return importlib.import_module(_COMMON)


def check_version() -> None:
    """RuntimeError, in a sentence, for an SGLang whose names differ."""
    version = getattr(sglang, "__version__", "unknown")
    if version not in TESTED:
        raise RuntimeError(f"sharedseg.sglang supports SGLang {', '.join(TESTED)}; this is "
                           f"SGLang {version}, whose host-pool allocator seam "
                           f"(get_allocator_from_storage, HostTensorAllocator) it has not "
                           f"been checked against")
    common = _common()
    missing = [f"{_COMMON}.{n}" for n in ("get_allocator_from_storage", "HostTensorAllocator")
               if not hasattr(common, n)]
    missing += [f"{m}.get_allocator_from_storage" for m in USERS
                if not hasattr(importlib.import_module(m), "get_allocator_from_storage")]
    if missing:
        raise RuntimeError(f"sharedseg.sglang needs names that SGLang {version} does not "
                           f"have: {', '.join(missing)}")


try:
    _Allocator = importlib.import_module(_COMMON).HostTensorAllocator
except Exception:  # check_version says what differs
    _Allocator = object


def _tp_group() -> Any:
    from sglang.srt.distributed.parallel_state import get_tp_group
    return get_tp_group()


class SharedSegHostTensorAllocator(_Allocator):  # type: ignore[misc, valid-type]
    """HostTensorAllocator whose allocate() returns a tensor over one
    sharedseg segment of the group (SGLang's TP GroupCoordinator unless
    group is given). pages, numa, populate, populate_threads and timeout
    are create_shared_segment's."""

    _count = itertools.count()

    def __init__(self, group: Any = None, *, pages: Optional[str] = None,
                 numa: Any = None, populate: Optional[str] = None, populate_threads: int = 0,
                 timeout: Any = None, name: str = "sglang-hicache"):
        check_version()
        super().__init__()
        self.group = group
        self.name = name
        self.segment_args = segment_args(
            dict(pages=pages, numa=numa, populate=populate, populate_threads=populate_threads,
                 timeout=timeout, pin="none"), "cpu")  # SGLang pins the pool itself
        self.segments: List[Any] = []

    def allocate(self, dims: tuple, dtype: Any, device: str) -> Any:
        if device != "cpu":
            raise ValueError(f"SharedSegHostTensorAllocator allocates host memory; got "
                             f"device={device!r}")
        self.dtype, self.dims = dtype, dims
        group = self.group if self.group is not None else _tp_group()
        # The n-th pool of this process: the same n on every rank.
        seg = create_shared_segment(
            f"{self.name}-{next(self._count)}", comm_group=group,
            blocks={"pool": dict(count=1, shape=tuple(dims), dtype=dtype)},
            **self.segment_args)
        self.segments.append(seg)
        return seg.tensors("pool")[0]

    def close(self) -> None:
        """Closes the segments; their pages go with the last tensor over them."""
        for seg in self.segments:
            seg.close()
        self.segments.clear()


_installed: Dict[str, Callable[..., Any]] = {}


def install(make: Optional[Callable[[], Any]] = None, allocator_types: Any = ("default",)) -> None:
    """Makes SGLang's host pools take their memory from sharedseg: every
    module that calls get_allocator_from_storage gets one that answers
    make() (default: SharedSegHostTensorAllocator()) for the allocator
    types named (SGLang's "default"; others, such as "mooncake", keep
    theirs). Checks the SGLang version first; a second install replaces
    the first."""
    check_version()
    uninstall()
    make = make or SharedSegHostTensorAllocator
    sglang_own = _common().get_allocator_from_storage
    types = set(allocator_types)

    def get_allocator_from_storage(allocator_type: str) -> Any:
        if allocator_type in types:
            return make()
        return sglang_own(allocator_type)

    get_allocator_from_storage.sharedseg = True  # type: ignore[attr-defined]
    for name in USERS + (_COMMON,):
        module = importlib.import_module(name)
        _installed[name] = module.get_allocator_from_storage
        module.get_allocator_from_storage = get_allocator_from_storage


def uninstall() -> None:
    """Puts SGLang's own get_allocator_from_storage back where install() replaced it."""
    for name, own in _installed.items():
        importlib.import_module(name).get_allocator_from_storage = own
    _installed.clear()


def installed() -> bool:
    return bool(_installed)
