# SPDX-License-Identifier: Apache-2.0
"""The one module that names backends and devices. What a backend is comes
from the C library's probe (its "backends" facts), so a backend added in C
needs no change here; what stays named is torch's side: its device modules
(torch.cuda, torch.npu), the device type of a collective backend, and the
engine platform whose devices pin host memory.

Nothing here loads a driver for a memfd segment: a backend named
explicitly is probed alone (sseg_probe_backend), once per process, and only
mmap=False probes them all."""
import functools
import sys
from typing import Any, Callable, List

from . import _native

# C's default backend, the one "auto" picks: never pinned (sseg_backend_get).
DEFAULT = "auto"
# The torch device modules whose copies may read or write a pinned segment:
# torch.cuda (NVIDIA) and torch.npu (torch_npu, Ascend) mirror each other's API.
TORCH_DEVICE_MODULES = ("cuda", "npu")
# The module whose current device is device_id's default (docs/python.md).
_ORDINAL_MODULE = "cuda"
# A c10d backend's device type, as torch's object collectives choose it.
_COLLECTIVE_DEVICES = {"nccl": "cuda", "hccl": "npu", "xccl": "xpu"}
# The engine platform (vLLM's, LMCache's torch) whose devices pin host
# memory: host registration and VMM host memory are served there only.
PINNING_PLATFORM = "cuda"


@functools.lru_cache(maxsize=None)
def _facts(name: str) -> Any:
    """The probe's facts of one backend (sseg_probe_backend, which loads
    that backend's driver only: none for memfd): (name, pinned,
    crosses_hosts, driver); None for a name the library does not know
    (create then says so)."""
    try:
        kind = _native.parse("backend", name)
    except ValueError:
        return None
    return _native.probe_backend(kind)


def _pinned(name: str) -> bool:
    facts = _facts(name)
    return bool(facts and facts[1])


def _driver_loaded(name: str) -> bool:
    """Its driver loaded here (the backend may still be unavailable: its
    create then says why, which beats another backend's missing driver)."""
    facts = _facts(name)
    return bool(facts and facts[3])


def is_device_backend(backend: Any) -> bool:
    """The backend's memory is pinned for device DMA (the probe's "pinned"):
    a device's VMM host memory. Such a backend takes a device ordinal, and
    its owner may serve ranks on other hosts through a fabric handle (the C
    library refuses the group, naming the hosts, where only in-host handles
    could be made). "auto" is answered without the probe, and no other
    backend's driver is loaded to answer for one."""
    name = str(backend).lower()
    return name != DEFAULT and _pinned(name)


@functools.lru_cache(maxsize=1)
def device_backends() -> List[str]:
    """The pinned backends, in the C library's order (this probes each)."""
    names, kind = [], _native.parse("backend", DEFAULT) + 1
    while (facts := _native.probe_backend(kind)) is not None:
        if facts[1]:
            names.append(facts[0])
        kind += 1
    return names


def supported(backend: str) -> bool:
    ok, _ = _native.supported(_native.parse("backend", backend), _native.parse("pages", "auto"))
    return bool(ok)


def segment_supported(mmap: bool, host_register: bool) -> bool:
    """Mooncake's shared_segment_supported(mmap, host_register), answered by
    the probe: mmap False, some device backend's VMM host memory works
    here; True, host-memory segments do (memfd), and for host_register
    the pinning platform's driver loaded (the registration is its call)."""
    if not mmap:
        return any(supported(name) for name in device_backends())
    return supported("memfd") and (not host_register or _driver_loaded(PINNING_PLATFORM))


def vmm_backend(backend: Any) -> str:
    """The backend mmap=False means: a device backend's VMM host memory, the
    one named, else the first this host supports, else the first whose
    driver loaded here, else the first (whose create then says why it
    cannot: an NPU on PCIe, not a CUDA driver that is absent)."""
    names = device_backends()
    if not names:
        raise ValueError("mmap=False selects a device backend's VMM memory, and this "
                         "library has no device backend")
    if backend in (None, DEFAULT):
        loaded = next((name for name in names if _driver_loaded(name)), names[0])
        return next((name for name in names if supported(name)), loaded)
    if backend not in names:
        raise ValueError(f"mmap=False selects a device backend's VMM memory "
                         f"({', '.join(names)}), not backend={backend!r}")
    return backend


def current_device(needed: Callable[[], bool]) -> int:
    """torch's current CUDA device when torch already initialised CUDA and
    needed() says the segment uses a device, else 0. Never initialises CUDA
    (a process that did not ask for it must stay fork-safe), and asks
    needed() only once CUDA is up."""
    module = getattr(sys.modules.get("torch"), _ORDINAL_MODULE, None)
    if module is None or not module.is_initialized() or not needed():
        return 0
    return int(module.current_device())


def quiesce(device: int) -> Callable[[], None]:
    """Run before a pinned segment's pages go: no device copy may still be
    reading or writing them (a non_blocking copy returns before its DMA
    ends). Synchronises the current device and the segment's of every
    torch device module already initialised; work on other devices is the
    caller's to synchronise. Nothing to do where torch initialised none:
    then no copy of torch's can be in flight."""
    def run() -> None:
        torch = sys.modules.get("torch")
        for name in TORCH_DEVICE_MODULES:
            module = getattr(torch, name, None) if torch is not None else None
            initialised = getattr(module, "is_initialized", None)
            if initialised is None or not initialised():
                continue
            for d in sorted({device, int(module.current_device())}):
                module.synchronize(d)
    return run


def collective_kind(group: Any) -> str:
    """The device type for a group's collective, as torch's object
    collectives choose it: "cpu" when the group has a CPU backend, else its
    device's (NCCL's, HCCL's or XCCL's)."""
    types = getattr(group, "_device_types", None)  # a ProcessGroup of torch 2.x
    if types:
        kinds = [d.type for d in types]
        return "cpu" if "cpu" in kinds else kinds[0]
    # torch 1.x process groups and 2.x backends name themselves.
    name = str(group.name() if hasattr(group, "name") else "").lower()
    return next((dev for word, dev in _COLLECTIVE_DEVICES.items() if word in name), "cpu")


def collective_device(torch: Any, group: Any) -> Any:
    """collective_kind's device, at the current index of that type."""
    kind = collective_kind(group)
    if kind == "cpu":
        return torch.device("cpu")
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "current_device_index"):
        index = accelerator.current_device_index()
    else:
        index = getattr(torch, kind).current_device()
    return torch.device(kind, index)


def torch_platform(torch: Any) -> str:
    """PINNING_PLATFORM where torch has its devices, else "cpu"."""
    return PINNING_PLATFORM if getattr(torch, PINNING_PLATFORM).is_available() else "cpu"
