# SPDX-License-Identifier: Apache-2.0
"""An engine's offloaded-KV region as one segment, and the declaration
that gives its bytes their meaning: the part of vLLM's adapter that needs
no vLLM (spec.py builds on it; the GPU checks use it where no engine can
be installed)."""
from typing import Any, Dict

from ..base import SegmentRequest, SharedSegmentError, create


def region_segment(name: str, group: Any, num_chunks: int, row_stride: int,
                   request: SegmentRequest) -> Any:
    """One segment over group holding num_chunks rows of row_stride bytes
    each, back to back (row i at offset i * row_stride), as a block
    "chunks" so that ranks that disagree on the shape fail together."""
    seg = create(name, request, layout="grouped", comm_group=group,
                 blocks={"chunks": dict(count=num_chunks, shape=(row_stride,), dtype="uint8")})
    if seg.offsets("chunks") != [i * row_stride for i in range(num_chunks)]:
        seg.close()
        raise SharedSegmentError(f"segment '{name}' laid chunks out with a stride other than "
                                 f"the row stride {row_stride}")
    return seg


def declaration(config: Any) -> Dict[str, Any]:
    """What gives a block hash and its bytes their meaning, from vLLM's
    OffloadingConfig: the model, its dtype, the KV groups (their layers),
    the block and chunk geometry, the bytes a block holds in each worker,
    the TP layout and the cache layout."""
    return {
        "model": config.model.name,
        "dtype": config.model.dtype,
        "groups": [[g.group_id, g.tokens_per_block, list(g.layer_names)] for g in config.groups],
        "tokens_per_hash": config.cache.tokens_per_hash,
        "blocks_per_chunk": config.cache.blocks_per_chunk,
        "worker_kv_bytes_per_block": config.worker_kv_bytes_per_block,
        "tp_size": config.parallel.tp_size,
        "world_size": config.parallel.world_size,
        "replicated_layout": bool(config.replicated_layout),
        "kv_cache_layout": config.kv_cache_layout,
    }
