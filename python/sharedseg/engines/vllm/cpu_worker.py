# SPDX-License-Identifier: Apache-2.0
"""sharedseg.vllm's worker for vLLM's CPU platform, which has no KV
offloading of its own: SharedSegCPUWorker copies blocks between the
engine's CPU KV cache and the group's segment (its region: spec.py's
SharedSegRegion). Built by SharedSegOffloadingSpec on that platform only;
vLLM's names come from ENGINE (sharedseg.engines.vllm)."""
import json
import os
import time
import zlib
from typing import Any, List, Optional

import numpy as np
import torch

from . import ENGINE

# A file each worker appends one JSON line per transfer to.
TRACE_ENV = "SHAREDSEG_VLLM_TRACE"
_TransferResult = ENGINE.get("vllm.v1.kv_offload.base.TransferResult")
_OffloadingWorker = ENGINE.get("vllm.v1.kv_offload.base.OffloadingWorker", object)


def _flat_sub_blocks(block_ids: np.ndarray, per_chunk: int, count: int, skip: int) -> np.ndarray:
    """The flat sub-block index (chunk * per_chunk + position) of each of
    count consecutive blocks starting skip sub-blocks into block_ids[0]."""
    ids = block_ids.astype(np.int64)
    flat = (ids[:, None] * per_chunk + np.arange(per_chunk, dtype=np.int64)).ravel()
    return flat[skip:skip + count]


class SharedSegCPUWorker(_OffloadingWorker):  # type: ignore[misc, valid-type]
    """Moves KV blocks between vLLM's CPU KV cache and the segment, in the
    direct layout vLLM's CUDA worker uses: chunk c's row holds this rank's
    slot, and in it each tensor's page for each of the chunk's blocks.
    Copies run in submit_store/submit_load (the CPU has no copy engine to
    overlap with); get_finished reports them."""

    def __init__(self, kv_caches: Any, blocks_per_chunk: int, region: Optional[Any]):
        # region None: a worker with no KV to offload (no tensors), as vLLM
        # builds one with no region.
        self._region = region
        self._per_chunk = blocks_per_chunk
        self._refs = kv_caches.group_data_refs
        self._engine: List[torch.Tensor] = []
        self._chunks: List[torch.Tensor] = []
        for t in kv_caches.tensors:
            page = t.page_size_bytes
            self._engine.append(t.tensor.view(torch.int8).view(-1, page))
            view = region.create_next_worker_view(page * blocks_per_chunk)
            # (chunks, blocks_per_chunk, page) over the same bytes
            self._chunks.append(view.as_strided((region.num_chunks, blocks_per_chunk, page),
                                                (view.stride(0), page, 1)))
        self._done: List[Any] = []
        self._rank = region.segment.rank if region is not None else None
        self._trace = os.environ.get(TRACE_ENV)

    def submit_store(self, job_id: int, src_spec: Any, dst_spec: Any) -> bool:
        return self._transfer(job_id, "store", engine_spec=src_spec, chunk_spec=dst_spec)

    def submit_load(self, job_id: int, src_spec: Any, dst_spec: Any,
                    expedited: bool = False) -> bool:
        return self._transfer(job_id, "load", engine_spec=dst_spec, chunk_spec=src_spec)

    def get_finished(self) -> List[Any]:
        done, self._done = self._done, []
        return done

    def wait(self, job_ids: Any) -> None:
        return  # every copy finished in its submit call

    def shutdown(self) -> None:
        self._engine.clear()
        self._chunks.clear()
        if self._region is not None:
            self._region.cleanup()
            self._region = None

    def _transfer(self, job_id: int, op: str, engine_spec: Any, chunk_spec: Any) -> bool:
        start = time.perf_counter()
        chunks = chunk_spec.block_ids
        if op == "load":
            rows_crc = self._rows_crc(chunks)
        moved, pages = 0, []
        for engine, chunk, rows, cols, engine_ids, size in self._pairs(engine_spec, chunks):
            if op == "store":
                chunk[rows, cols, :size] = engine[engine_ids, :size]
            else:
                engine[engine_ids, :size] = chunk[rows, cols, :size]
            moved += len(engine_ids) * size
            if self._trace:
                pages.append(engine[engine_ids, :size].numpy().tobytes())
        if op == "store":
            rows_crc = self._rows_crc(chunks)
        self._done.append(_TransferResult(job_id=job_id, success=True, transfer_size=moved,
                                 transfer_time=time.perf_counter() - start))
        if self._trace:
            self._record(job_id, op, chunks, rows_crc, zlib.crc32(b"".join(pages)))
        return True

    def _pairs(self, engine_spec: Any, chunks: np.ndarray) -> Any:
        """(engine tensor, chunk view, chunk rows, positions in them, engine
        blocks, bytes per page) for each tensor of each group a transfer
        moves: vLLM's direct layout, where a group's first chunk may start
        part-way (its first block's index modulo blocks_per_chunk)."""
        blocks, b_at, c_at = engine_spec.block_ids, 0, 0
        for refs, count, first in zip(self._refs, engine_spec.group_sizes,
                                      engine_spec.block_indices):
            if count == 0:
                continue
            skip = first % self._per_chunk
            n_chunks = -(-(count + skip) // self._per_chunk)
            flat = torch.from_numpy(_flat_sub_blocks(chunks[c_at:c_at + n_chunks],
                                                     self._per_chunk, count, skip))
            engine_ids = torch.from_numpy(blocks[b_at:b_at + count].astype(np.int64))
            rows, cols = flat // self._per_chunk, flat % self._per_chunk
            for ref in refs:
                yield (self._engine[ref.tensor_idx], self._chunks[ref.tensor_idx], rows, cols,
                       engine_ids, ref.page_size_bytes)
            b_at += count
            c_at += n_chunks

    def _rows_crc(self, chunks: np.ndarray) -> List[int]:
        """A CRC-32 of this rank's slot in each chunk's row."""
        if not self._trace:
            return []
        r = self._region
        slot = r.rank * r.cpu_page_size
        return [zlib.crc32(r._base[c * r._row_stride + slot:][:r.cpu_page_size].numpy().tobytes())
                for c in chunks.tolist()]

    def _record(self, job_id: int, op: str, chunks: np.ndarray, rows_crc: List[int],
                pages_crc: int) -> None:
        """One JSON line in $SHAREDSEG_VLLM_TRACE: this rank, the chunks a
        transfer touched, a CRC-32 of this rank's slot in each chunk's row (after
        a store, before a load) and one of the engine pages it read (store)
        or wrote (load), in transfer order; and the region's shape."""
        r = self._region
        line = json.dumps(dict(pid=os.getpid(), rank=self._rank, op=op, job=job_id,
                               chunks=chunks.tolist(), rows_crc32=rows_crc,
                               pages_crc32=pages_crc, segment=r.segment.name,
                               num_chunks=r.num_chunks, row_stride=r._row_stride,
                               slot=r.rank, slot_bytes=r.cpu_page_size))
        with open(self._trace, "a") as f:
            f.write(line + "\n")
