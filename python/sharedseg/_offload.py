# SPDX-License-Identifier: Apache-2.0
"""An engine's offloaded-KV region as one segment: the part of the engine
adapters that needs no engine (sharedseg.vllm builds on it; the GPU checks
use it where no engine can be installed)."""
from typing import Any, Dict

from ._engine import PINS, create_segment, segment_args  # noqa: F401 (the GPU checks' entry)
from ._native import SharedSegmentError
from .segment import SharedSegment


def region_segment(name: str, group: Any, num_chunks: int, row_stride: int,
                   args: Dict[str, Any]) -> SharedSegment:
    """One segment over group holding num_chunks rows of row_stride bytes
    each, back to back (row i at offset i * row_stride), as a block
    "chunks" so that ranks that disagree on the shape fail together."""
    seg = create_segment(
        name, args, blocks={"chunks": dict(count=num_chunks, shape=(row_stride,), dtype="uint8")},
        comm_group=group, layout="grouped")
    if seg.offsets("chunks") != [i * row_stride for i in range(num_chunks)]:
        seg.close()
        raise SharedSegmentError(f"segment '{name}' laid chunks out with a stride other than "
                                 f"the row stride {row_stride}")
    return seg
