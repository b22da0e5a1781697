# SPDX-License-Identifier: Apache-2.0
"""An engine's offloaded-KV region as one segment: the part of the engine
adapters that needs no engine (sharedseg.vllm builds on it; the GPU checks
use it where no engine can be installed)."""
from typing import Any, Dict

from ._backends import PINNING_PLATFORM
from ._native import SharedSegmentError
from ._protocol import create_shared_segment
from .segment import SharedSegment

PINS = ("auto", "host_register", "vmm", "none")


def segment_args(options: Dict[str, Any], platform: str) -> Dict[str, Any]:
    """create_shared_segment's arguments for an adapter's settings (pages,
    numa, populate, populate_threads, timeout, pin) on a platform (CUDA's,
    "cpu", ...). pin "auto" is host registration on CUDA, none elsewhere;
    "host_register" and "vmm" need CUDA (ValueError elsewhere)."""
    pin = options.get("pin", "auto")
    if pin not in PINS:
        raise ValueError(f"sharedseg setting pin={pin!r}: expected one of {', '.join(PINS)}")
    if pin == "auto":
        pin = "host_register" if platform == PINNING_PLATFORM else "none"
    if pin != "none" and platform != PINNING_PLATFORM:
        raise ValueError(f"sharedseg setting pin={pin!r} needs CUDA; the engine runs on its "
                         f"{platform} platform here (use pin: none)")
    args = {k: options.get(k) for k in ("pages", "numa", "populate", "timeout")}
    args["populate_threads"] = options.get("populate_threads", 0)
    if pin == "host_register":
        args["host_register"] = True
    elif pin == "vmm":
        args["mmap"] = False
    return args


def region_segment(name: str, group: Any, num_chunks: int, row_stride: int,
                   args: Dict[str, Any]) -> SharedSegment:
    """One segment over group holding num_chunks rows of row_stride bytes
    each, back to back (row i at offset i * row_stride), as a block
    "chunks" so that ranks that disagree on the shape fail together."""
    seg = create_shared_segment(
        name, blocks={"chunks": dict(count=num_chunks, shape=(row_stride,), dtype="uint8")},
        comm_group=group, layout="grouped", **args)
    if seg.offsets("chunks") != [i * row_stride for i in range(num_chunks)]:
        seg.close()
        raise SharedSegmentError(f"segment '{name}' laid chunks out with a stride other than "
                                 f"the row stride {row_stride}")
    return seg
