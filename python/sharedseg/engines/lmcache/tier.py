# SPDX-License-Identifier: Apache-2.0
"""LMCache's CPU tier (LocalCPUBackend) in one sharedseg segment, switched
on by LMCache's own configuration:

    max_local_cpu_size: 0                  # LMCache's own CPU tier: none
    storage_plugins: [LocalCPUBackend]     # ours in its place
    extra_config:
      storage_plugin.LocalCPUBackend.module_path: sharedseg.lmcache
      storage_plugin.LocalCPUBackend.class_name: SharedSegCPUBackend
      sharedseg.max_local_cpu_size: 5      # GB, as max_local_cpu_size
      sharedseg: {pages: thp}              # our settings (optional)

LMCache's storage manager loads storage plugins by module and class from
its configuration; one named LocalCPUBackend is its CPU tier, which every
other part of LMCache looks up by that name. SharedSegCPUBackend is a
LocalCPUBackend whose allocator (initialize_allocator, the method LMCache's
backends build their allocators with) is SharedSegMemoryAllocator: a
MixedMemoryAllocator whose arena is one segment of the ranks that build a
CPU tier, a memfd (no /dev/shm, nothing left behind), on the page kind and
NUMA node asked for, pinned by the library on CUDA. No LMCache function is
replaced. For MLA models with save_only_first_rank (LMCache's default
there) rank 0 alone stores: every other rank that builds a CPU tier maps
rank 0's arena instead of holding one of its own; otherwise every rank has
its own slot of one segment.

A configuration the tier cannot serve (another LMCache release, a tier
LMCache builds over its CPU tier before the plugins, an unknown setting, a
size that is not one or holds no chunk) stops the engine's start with one
sentence (SystemExit: LMCache's plugin loader logs and goes on past any
Exception, which would leave the engine without a CPU tier; so does any
other error of the tier's). Tiers that LMCache builds before it loads the
plugin (local_disk, ...) fail in LMCache before the plugin runs: under
vLLM, sharedseg.lmcache_vllm refuses them first.

Importing sharedseg never imports this module; this module imports LMCache
(through ENGINE, sharedseg.engines.lmcache).
"""
import math
from typing import Any, Dict, List, Mapping, Optional

import torch

from sharedseg import SharedSegmentError

from . import ENGINE
from . import TIER as _ADAPTER
from ..base import SETTINGS, U64_MAX, SegmentRequest, pool, segment_name, torch_platform

_ALLOCATORS = "lmcache.v1.memory_allocators"
_MIXED = f"{_ALLOCATORS}.mixed_memory_allocator"
_TENSOR = f"{_ALLOCATORS}.tensor_memory_allocator"
_CPU = "lmcache.v1.storage_backend.local_cpu_backend"

# LMCache's name of its CPU tier: the plugin's name in storage_plugins.
TIER = "LocalCPUBackend"
SIZE_KEY = "sharedseg.max_local_cpu_size"
SETTINGS_KEY = "sharedseg"
# The configuration that switches the tier on (docs/integrations.md): the
# module as users name it.
PLUGIN = {f"storage_plugin.{TIER}.module_path": "sharedseg.lmcache",
          f"storage_plugin.{TIER}.class_name": "SharedSegCPUBackend"}
# LMCache's GB: its sizes count 2**30 bytes (LocalCPUBackend's own).
GB = 1 << 30
# LMCache's settings the tier cannot serve beside it, and why (LMCache
# 0.5.6's CreateStorageBackends). The tiers over LMCache's CPU tier are
# built before the plugins are loaded, and assert that tier, which
# max_local_cpu_size 0 leaves out: the shared tier comes after them, and
# the plugin loader hands every plugin that absent tier.
_BEFORE = "over its own CPU tier, before it loads the storage plugin that is the shared tier"
UNSERVED = {
    "local_disk": f"LMCache builds its disk tier (LocalDiskBackend) {_BEFORE}",
    "remote_url": f"LMCache builds its remote tier {_BEFORE}",
    "remote_storage_plugins": f"LMCache builds its remote tiers {_BEFORE}",
    "enable_p2p": f"LMCache builds its P2P tier {_BEFORE}",
    "enable_pd": "LMCache's disaggregated prefill builds its PD backend in place of a CPU tier",
    "gds_path": "LMCache's GDS tier keeps its own buffers, without a LocalCPUBackend",
    "maru_path": "LMCache's Maru tier keeps its own buffers, without a LocalCPUBackend",
    "enable_controller": "LMCache gives storage plugins no controller worker",
    "enable_scheduler_bypass_lookup": "it builds the scheduler's engine, which the tier "
                                      "does not serve",
}


def check_version() -> None:
    """RuntimeError, in a sentence, for an LMCache whose names differ."""
    ENGINE.check(_ADAPTER)


def tier_bytes(value: Any, setting: str) -> int:
    """The tier's size in bytes for value GB (LMCache's GB; a number, or
    text of one, as LMCache's own converter reads its sizes): ValueError,
    in a sentence naming setting and value, for anything else: a bool, a
    value that is no number, not finite, under a byte or past the C
    library's 64-bit sizes. More than the library maps or the host has is
    the library's to refuse when the segment is made."""
    gb = math.nan
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            gb = float(value)
        except ValueError:
            pass
    nbytes = gb * GB
    if not (math.isfinite(nbytes) and 1 <= nbytes <= U64_MAX):
        raise ValueError(f"{setting} is {value!r}: expected the shared tier's size in GB (2**30 "
                         f"bytes, as LMCache counts them), a finite number or its text, from "
                         f"1e-09 (a byte) to under {(U64_MAX + 1) // GB} (2**64 bytes, the C "
                         f"library's sizes)")
    return int(nbytes)


_Mixed = ENGINE.get(f"{_MIXED}.MixedMemoryAllocator", object)
_LocalCPUBackend = ENGINE.get(f"{_CPU}.LocalCPUBackend", object)


class SharedSegMemoryAllocator(_Mixed):  # type: ignore[misc, valid-type]
    """MixedMemoryAllocator over one sharedseg segment: size bytes for this
    rank's objects.

    group: the ranks that map it (a torch ProcessGroup, a GroupCoordinator,
    ...; None: this process alone, or with world_size the default
    torch.distributed group, which must have that many ranks). replicated (default): every rank maps
    the same size bytes and owner_rank (default 0) alone places objects in
    them; the others refuse to allocate and read objects at their addresses
    (read_at). Not replicated: one slot of size bytes per rank, each rank
    allocating in its own. role names the arena among the group's; with
    name it makes the segment's name, the same on every rank (never a
    per-process count), so a rank that refused before its call meets the
    others again at the next. Settings: pages, numa, populate,
    populate_threads, timeout, pin (sharedseg's; pin auto: VMM host memory
    on CUDA where the probe says it works, else registration; none
    elsewhere), or request, a SegmentRequest parsed already (plan()'s).
    Other keyword arguments are MixedMemoryAllocator's
    (numa_mapping, align_bytes)."""

    def __init__(self, size: int, group: Any = None, *, owner_rank: int = 0,
                 replicated: bool = True, role: str = "cpu", name: str = "lmcache",
                 world_size: Optional[int] = None, request: Optional[SegmentRequest] = None,
                 **kwargs: Any):
        check_version()
        settings = {k: kwargs.pop(k) for k in list(kwargs) if k in SETTINGS}
        if kwargs.get("shm_name") or kwargs.get("use_hugepages") or kwargs.get("use_paging"):
            raise ValueError("SharedSegMemoryAllocator replaces shm_name, use_hugepages and "
                             "use_paging: the arena is a memfd segment, its page kind is pages=")
        if request is None:
            request = SegmentRequest.parse(settings, "SharedSegMemoryAllocator's settings")
        self.segment, arena = pool(segment_name(name, role), request.on(torch_platform(torch)),
                                   nbytes=size, replicated=replicated, block=role,
                                   comm_group=group, world_size=world_size,
                                   owner_rank=owner_rank)
        self.owner_rank = owner_rank
        self.allocates = not replicated or self.segment.rank == owner_rank
        try:
            # LMCache's allocator over no memory of its own, then over the arena.
            super().__init__(0, **kwargs)
            self.buffer, self.size = arena, size
            tensor_allocator = ENGINE.get(f"{_TENSOR}.TensorMemoryAllocator")
            self.pin_allocator = tensor_allocator(arena, align_bytes=self.align_bytes)
        except BaseException:
            self.segment.close()
            raise

    def _refuse(self) -> None:
        if not self.allocates:
            raise RuntimeError(f"rank {self.segment.rank} reads the segment "
                               f"'{self.segment.name}'; rank {self.owner_rank} allocates in it")

    def allocate(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse()
        return super().allocate(*args, **kwargs)

    def batched_allocate(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse()
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
        """Releases the arena, even while LMCache still holds this
        allocator (0.5.6's metrics keep its backends): the segment goes
        with the last rank's mapping, once the objects over it are gone."""
        if not self._unregistered:
            self._unregistered = True
            self.buffer = torch.empty(0, dtype=torch.uint8)
            tensor_allocator = ENGINE.get(f"{_TENSOR}.TensorMemoryAllocator")
            self.pin_allocator = tensor_allocator(self.buffer, align_bytes=self.align_bytes)
            self.segment.close()


# ---- the storage plugin: LMCache's CPU tier over the allocator ----

def _extra(config: Any) -> Mapping[str, Any]:
    return config.extra_config or {}


def config_refusal(config: Any) -> Optional[str]:
    """Why LMCache's configuration alone (any rank, any role) cannot have
    this tier, in a sentence that starts with the setting, or None:
    sharedseg.lmcache_vllm asks it before LMCache builds anything."""
    plugins = list(config.storage_plugins or ())
    if plugins != [TIER]:
        return (f"storage_plugins is {plugins}: name {TIER} alone (LMCache hands the other "
                f"plugins its CPU tier before ours is made)")
    if config.max_local_cpu_size:
        return (f"max_local_cpu_size is {config.max_local_cpu_size}: set it to 0 (LMCache "
                f"would build its own CPU tier too) and the size as {SIZE_KEY} in extra_config")
    for option, why in UNSERVED.items():
        value = getattr(config, option, None)
        if value:
            return f"{option} is {value!r}: {why}; leave {option} unset"
    if _extra(config).get("enable_nixl_storage"):
        return "enable_nixl_storage is set: NIXL storage pages LMCache's own CPU pool"
    try:
        tier_bytes(_extra(config).get(SIZE_KEY), f"extra_config's {SIZE_KEY}")
    except ValueError as e:
        return str(e)
    return None


def refusal(config: Any, metadata: Any) -> Optional[str]:
    """Why this rank's CPU tier cannot be ours, or None."""
    why = config_refusal(config)
    if why is None and (metadata is None or metadata.role == "scheduler"):
        why = "the tier serves LMCache's workers, not its scheduler"
    return why


def replicated(config: Any, metadata: Any) -> bool:
    """Whether rank 0 alone stores (LMCache's save_only_first_rank, on
    MLA models only), so that the other ranks' tiers can be rank 0's."""
    return bool(config.get_extra_config_value("save_only_first_rank", metadata.use_mla)
                and metadata.use_mla)


def tier_ranks(config: Any, metadata: Any) -> List[int]:
    """The ranks whose LMCache engine builds a CPU tier (LMCacheEngine.
    post_init, 0.5.6): every rank, unless rank 0 alone stores; then rank 0
    and its lookup-server ranks ([0] by default for MLA)."""
    world = metadata.world_size
    if not replicated(config, metadata) or config.use_layerwise:
        return list(range(world))
    ids = config.get_lookup_server_worker_ids(metadata.use_mla, world)
    return sorted(set(ids) | {metadata.first_rank})


def plan(config: Any, metadata: Any) -> Dict[str, Any]:
    """SharedSegMemoryAllocator's arguments for this rank's CPU tier."""
    why = refusal(config, metadata)
    if why is not None:
        raise ValueError(why)
    ranks = tier_ranks(config, metadata)
    if len(ranks) not in (1, metadata.world_size):
        raise ValueError(f"LMCache builds a CPU tier on ranks {ranks} of {metadata.world_size}: "
                         f"a segment serves every rank of the group or rank 0 alone "
                         f"(lookup_server_worker_ids: name every rank, or leave it unset)")
    request = SegmentRequest.parse(_extra(config).get(SETTINGS_KEY),
                                   f"extra_config's {SETTINGS_KEY}")
    # One rank: the arena is its own, as LMCache's is; every rank: the
    # default torch.distributed group, which has LMCache's world_size
    # ranks (create_shared_segment says so when it has not).
    size = tier_bytes(_extra(config)[SIZE_KEY], f"extra_config's {SIZE_KEY}")
    return dict(size=size, world_size=len(ranks),
                replicated=replicated(config, metadata), owner_rank=metadata.first_rank,
                name=segment_name("lmcache", metadata.model_name),
                role=f"{TIER}-tp{metadata.world_size}", request=request)


class SharedSegCPUBackend(_LocalCPUBackend):  # type: ignore[misc, valid-type]
    """LMCache's LocalCPUBackend over SharedSegMemoryAllocator, built by
    LMCache's storage manager as the storage plugin named LocalCPUBackend
    (see the module's docstring). A configuration it cannot serve stops
    the start with SystemExit and the sentence."""

    def __init__(self, config: Any, dst_device: str, metadata: Any,
                 local_cpu_backend: Any = None, loop: Any = None):
        try:
            check_version()
            super().__init__(config, metadata, dst_device)
            self._holds_a_chunk()
        except (RuntimeError, ValueError, SharedSegmentError) as e:
            raise SystemExit(f"sharedseg.lmcache ({TIER} storage plugin): {e}") from None
        except Exception as e:  # any other: LMCache's loader would log it, and go on
            raise SystemExit(f"sharedseg.lmcache ({TIER} storage plugin): "
                             f"{type(e).__name__}: {e}") from e

    def _holds_a_chunk(self) -> None:
        """ValueError, in a sentence, for an arena too small for one of
        LMCache's chunks of this model (a tier that would hold nothing)."""
        if self.calculate_chunk_budget() > 0:
            return
        chunk, size = self._aligned_chunk_bytes(), self.memory_allocator.size
        self.close()
        given = _extra(self.config)[SIZE_KEY]
        raise ValueError(f"extra_config's {SIZE_KEY} is {given!r} ({size} bytes): less than one "
                         f"LMCache chunk of this model ({chunk} bytes with its alignment), so "
                         f"the tier would hold nothing; give at least "
                         f"{math.ceil(chunk / GB * 1e6) / 1e6:g}")

    def initialize_allocator(self, config: Any, metadata: Any = None) -> Any:
        return SharedSegMemoryAllocator(**plan(config, metadata))

    def _aligned_chunk_bytes(self) -> int:
        align = self.memory_allocator.align_bytes
        return -(-self.get_full_chunk_size_bytes() // align) * align

    def calculate_chunk_budget(self) -> int:
        # LMCache's reads max_local_cpu_size, which is 0 here: the arena's size.
        return self.memory_allocator.size // self._aligned_chunk_bytes()

    def close(self) -> None:
        # LMCache's closes the allocator, then frees the objects in it.
        self.clear()
        super().close()
