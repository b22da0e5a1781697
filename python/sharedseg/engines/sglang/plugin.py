# SPDX-License-Identifier: Apache-2.0
"""SGLang's HiCache host pool in one sharedseg segment per attention-TP group.

One line switches it on, in every process SGLang's launcher starts:

    SHAREDSEG_SGLANG=1 python -m sglang.launch_server --enable-hierarchical-cache ...

(or SHAREDSEG_SGLANG='{"pages": "thp"}' with our settings). The wheel
declares a general plugin of SGLang (entry point group sglang.srt.plugins,
name sharedseg), which SGLang's load_plugins() runs in its launcher, its
schedulers, detokenizer and DP controller; it acts only where
SHAREDSEG_SGLANG is set, and then installs the allocator below. A
SHAREDSEG_SGLANG that cannot be served (an SGLang release this module was
not checked against, a setting it does not know) stops SGLang's start-up
with one sentence (SystemExit: SGLang's plugin loader logs and goes on past
any Exception, which would leave SGLang's private allocator in place).

SGLang builds a host pool per TP rank; each asks get_allocator_from_storage
for its allocator. Ours answers with one segment of the attention-TP group
(get_parallel().attn_tp_group) for each pool: for an MLA pool, whose bytes
are the same on every rank of that group, one copy that every rank maps;
for any other pool (MHA, whose heads differ per rank), one slot per rank
in the same segment. Under a storage backend whose pool is SGLang's plain
allocator and that this module is tested with ("file") it serves as well,
and under Mooncake's ("mooncake"), whose backend it replaces with
SharedMooncakeStore (mooncake.py: the ranks that map one copy split each
prefetch, one fetch per host); under any other the pool's construction
fails, naming the backend, rather than leaving SGLang's private allocator
in place.

install()/uninstall() do the same from Python, in the calling process.
Importing sharedseg never imports this module; this module imports SGLang
(through ENGINE, sharedseg.engines.sglang).

python -m sharedseg.sglang --check says whether the switch would take
effect in this environment, and if not, why (check.py): SGLang's loader
passes over a plugin it does not find, or that SGLANG_PLUGINS leaves out,
without a word.
"""
import dataclasses
import json
import logging
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import COMMON as _COMMON
from . import BASE, ENGINE, FACTORY, PLUGIN, USERS
from ..base import SegmentRequest, pool, quoted, segment_name, settings_help, torch_platform

SWITCH = "SHAREDSEG_SGLANG"
# The allocator types (SGLang's name for the storage backend's) this module
# serves under: those whose pool is SGLang's plain allocator, and Mooncake's
# (its backend replaced by ours, which takes the pool's pages as they are).
SERVED = ("default", "file", "mooncake")
# SGLang's storage backends this module replaces: name -> (module, class).
BACKENDS = {"mooncake": ("sharedseg.engines.sglang.mooncake", "SharedMooncakeStore")}
# Pools whose bytes are the same on every rank of an attention-TP group.
_REPLICATED = ("sglang.srt.mem_cache.pool_host.mla.MLATokenToKVPoolHost",)

_log = logging.getLogger("sharedseg.sglang")


def check_version() -> None:
    """RuntimeError, in a sentence, for an SGLang whose names differ."""
    ENGINE.check(PLUGIN)


def _group() -> Any:
    """The ranks whose pools hold the same tokens: the attention-TP group."""
    return ENGINE.get("sglang.srt.runtime_context.get_parallel")().attn_tp_group


def _replicated(pool: Any) -> bool:
    """Whether pool's bytes are the same on every rank of the group: an
    MLA pool, unless decode context parallelism gives each rank its own
    shard of the tokens (attn_dcp_size > 1)."""
    classes = [ENGINE.get(name) for name in _REPLICATED]
    return any(c is not None and isinstance(pool, c) for c in classes) and _dcp_size() == 1


def _dcp_size() -> int:
    """SGLang's decode-context-parallel width; 1 where nothing wrote it
    (a process that did not build SGLang's groups: a test's, a tool's)."""
    try:
        return int(ENGINE.get("sglang.srt.runtime_context.get_parallel")().attn_dcp_size)
    except (RuntimeError, ValueError):
        return 1


_HostTensorAllocator = ENGINE.get(f"{_COMMON}.HostTensorAllocator", object)


class SharedSegHostTensorAllocator(_HostTensorAllocator):  # type: ignore[misc, valid-type]
    """HostTensorAllocator whose allocate() returns a tensor over one
    sharedseg segment of the group: the whole segment for a pool that is
    the same on every rank (replicated), this rank's slot of it otherwise.
    role names the pool among the group's (every rank builds the same
    pools: the name is agreed, never counted per process). group: SGLang's
    attention-TP GroupCoordinator unless given. Settings: pages, numa,
    populate, populate_threads, timeout (create_shared_segment's), or
    request, a SegmentRequest parsed already; pin must stay "auto" or
    "none": SGLang pins the pool itself (pin_memory)."""

    def __init__(self, group: Any = None, *, role: str = "pool", replicated: bool = True,
                 name: str = "sglang", request: Optional[SegmentRequest] = None,
                 **settings: Any):
        check_version()
        super().__init__()
        if request is None:
            request = SegmentRequest.parse(settings, "SharedSegHostTensorAllocator's settings")
        if request.pin not in ("auto", "none"):
            raise ValueError(f"sharedseg.sglang: pin={request.pin!r}: SGLang pins the host "
                             f"pool itself (pin_memory), so only auto or none apply")
        self.group, self.role, self.replicated, self.name = group, role, replicated, name
        self.request = dataclasses.replace(request, pin="none").on(torch_platform(_torch()))
        self.segments: List[Any] = []

    def allocate(self, dims: tuple, dtype: Any, device: str) -> Any:
        if device != "cpu":
            raise ValueError(f"SharedSegHostTensorAllocator allocates host memory; got "
                             f"device={device!r}")
        self.dtype, self.dims = dtype, dims
        group = self.group if self.group is not None else _group()
        # The n-th buffer of this pool: the same n on every rank.
        name = segment_name(self.name, self.role, len(self.segments))
        seg, tensor = pool(name, self.request, shape=dims, dtype=dtype,
                           replicated=self.replicated, comm_group=group)
        self.segments.append(seg)
        return tensor

    def close(self) -> None:
        """Closes the segments; their pages go with the last tensor over them."""
        for seg in self.segments:
            seg.close()
        self.segments.clear()


def _torch() -> Any:
    import torch
    return torch


def _role(pool: Any) -> str:
    """A pool's name among the group's: its kind, what it holds, its layers."""
    parts = [type(pool).__name__, getattr(pool, "pool_label", None),
             getattr(pool, "start_layer", None)]
    return "-".join(str(p) for p in parts if p is not None)


def _pool_calling(depth: int = 2) -> Any:
    """The host pool whose constructor asks for its allocator or its memory
    budget: SGLang calls get_allocator_from_storage and
    host_memory_budget_bytes from HostKVCache methods (0.5.23; the tests
    build each pool kind to hold it to that)."""
    return sys._getframe(depth).f_locals.get("self")


# What install() replaced: (module, name) -> SGLang's own; and the storage
# factory's entries, backend -> SGLang's own (None: there was none).
_installed: Dict[Tuple[str, str], Callable[..., Any]] = {}
_backends_replaced: Dict[str, Any] = {}


def _sharing(host_pool: Any) -> int:
    """How many ranks on this host map the one copy of host_pool's memory:
    for a replicated pool our allocator serves, the ranks of its
    attention-TP group on this host (at most SGLang's ranks_per_host(),
    which assumes ranks placed evenly over the hosts); 1 otherwise."""
    allocator = getattr(host_pool, "allocator", None)
    if not isinstance(allocator, SharedSegHostTensorAllocator) or not allocator.replicated:
        return 1
    group = allocator.group if allocator.group is not None else _group()
    return max(1, min(group.world_size, ENGINE.get(f"{BASE}.ranks_per_host")()))


def _budget(own: Callable[..., int]) -> Callable[..., int]:
    """SGLang's host_memory_budget_bytes (own), counting a shared pool once
    per host. SGLang lets each rank claim (MemAvailable - 10 GiB) / ranks
    per host and books each pool's bytes against that; a pool in one
    segment of the attention-TP group takes its bytes once for the group's
    ranks on this host, so each of them books its share of them, and may
    claim the group's allowance together."""
    def host_memory_budget_bytes(requested_bytes: int = 0, *, auto_size: bool = False) -> int:
        share = _sharing(_pool_calling())
        if share == 1:
            return own(requested_bytes, auto_size=auto_size)
        return own(-(-requested_bytes // share), auto_size=auto_size) * share
    host_memory_budget_bytes.sharedseg = True  # type: ignore[attr-defined]
    return host_memory_budget_bytes


def refused(allocator_type: str) -> str:
    return (f"sharedseg.sglang serves SGLang's host pool with no storage backend or under "
            f"{', '.join(repr(t) for t in SERVED if t != 'default')}; this server's "
            f"storage backend {allocator_type!r} brings its own allocator or is untested "
            f"here: choose a served backend, or unset {SWITCH}")


def install(make: Optional[Callable[..., Any]] = None, **settings: Any) -> None:
    """Makes SGLang's host pools take their memory from sharedseg in this
    process: every module that calls get_allocator_from_storage gets one
    that answers make(role=, replicated=) (default:
    SharedSegHostTensorAllocator with settings) for the allocator types
    SERVED, and fails, naming the backend, for any other. Checks the SGLang
    version first; a second install replaces the first."""
    check_version()
    _install(make, SegmentRequest.parse(settings, "sharedseg.sglang.install()'s settings"))


def _install(make: Optional[Callable[..., Any]], request: SegmentRequest) -> None:
    """install(), its SGLang checked and its settings parsed."""
    uninstall()

    def build(role: str, replicated: bool) -> Any:
        if make is not None:
            return make(role=role, replicated=replicated)
        return SharedSegHostTensorAllocator(role=role, replicated=replicated, request=request)

    def get_allocator_from_storage(allocator_type: str) -> Any:
        if allocator_type not in SERVED:
            raise RuntimeError(refused(allocator_type))
        host_pool = _pool_calling()
        return build(_role(host_pool), _replicated(host_pool))

    get_allocator_from_storage.sharedseg = True  # type: ignore[attr-defined]
    factory = ENGINE.get(f"{FACTORY}.StorageBackendFactory")
    for backend, (module, cls) in BACKENDS.items():
        _backends_replaced[backend] = factory._registry.pop(backend, None)
        factory.register_backend(backend, module, cls)
    ours = dict(get_allocator_from_storage=get_allocator_from_storage,
                host_memory_budget_bytes=_budget(sys.modules[BASE].host_memory_budget_bytes))
    for name in USERS + (_COMMON,):
        module = sys.modules[name]  # imported by check_version()
        for attr, replacement in ours.items():
            if hasattr(module, attr):
                _installed[(name, attr)] = getattr(module, attr)
                setattr(module, attr, replacement)


def uninstall() -> None:
    """Puts SGLang's own functions back where install() replaced them."""
    for (name, attr), own in _installed.items():
        setattr(sys.modules[name], attr, own)
    _installed.clear()
    if _backends_replaced:
        registry = ENGINE.get(f"{FACTORY}.StorageBackendFactory")._registry
        for backend, own in _backends_replaced.items():
            registry.pop(backend, None)
            if own is not None:
                registry[backend] = own
        _backends_replaced.clear()


def installed() -> bool:
    return bool(_installed)


def switch_request(text: str) -> Optional[SegmentRequest]:
    """SHAREDSEG_SGLANG's value: None when off (unset, "", "0"), our
    settings when on ("1": the defaults; a JSON object: those). ValueError,
    in a sentence, for anything else."""
    text = text.strip()
    if text in ("", "0"):
        return None
    if text == "1":
        return SegmentRequest()
    try:
        given = json.loads(text)
    except ValueError:
        given = text
    if not isinstance(given, dict):
        raise ValueError(f"{SWITCH}={quoted(text)}: expected 1, 0, or a JSON object of settings "
                         f"({settings_help()})")
    return SegmentRequest.parse(given, SWITCH)


def plugin() -> None:
    """SGLang's general plugin (the wheel's entry point sglang.srt.plugins:
    sharedseg), run by load_plugins() in each process SGLang starts. Does
    nothing unless SHAREDSEG_SGLANG is set; then installs the allocator, or
    stops the start-up with the sentence that says why it cannot."""
    try:
        request = switch_request(os.environ.get(SWITCH, ""))
        if request is None:
            return
        check_version()
        _install(None, request)
    except (RuntimeError, ValueError) as e:
        raise SystemExit(f"sharedseg.sglang ({SWITCH} is set): {e}") from None
    _log.info("sharedseg.sglang: HiCache host pools go in sharedseg segments (pid %d)",
              os.getpid())
