# SPDX-License-Identifier: Apache-2.0
"""vLLM's host KV tier in one sharedseg segment per TP group.

One line of configuration selects it, through vLLM's own factory:

    --kv-transfer-config '{"kv_connector": "OffloadingConnector",
        "kv_role": "kv_both", "kv_connector_extra_config": {
        "spec_name": "SharedSegOffloadingSpec", "spec_module_path": "sharedseg.vllm",
        "cpu_bytes_to_use": 8589934592}}'

Our own settings go under "sharedseg" in kv_connector_extra_config (see
OPTIONS); an unknown one is an error that names it.

SharedSegOffloadingSpec is vLLM's CPUOffloadingSpec with another region:
one segment over the group's ranks instead of a file in /dev/shm, sized as
vLLM sizes its own (chunks x row stride; one copy for MLA's replicated
layout, else one slot per rank in the same segment), on the page kind and
NUMA node asked for, pinned by sharedseg (chunked host registration, or the
cuda backend's VMM memory, which peers import already pinned) instead of
by every rank. On CUDA the region goes to vLLM's own CPUOffloadingWorker
and its transfer handlers; on vLLM's CPU platform, which has no KV
offloading of its own, SharedSegCPUWorker copies blocks between the
engine's KV cache and the segment.

Importing sharedseg never imports this module; this module imports vLLM.
"""
import json
import logging
import os
import time
import zlib
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch

import vllm

from ._backends import PINNING_PLATFORM
from ._offload import region_segment, segment_args

# vLLM releases this module is written for: the one its tests run against,
# and the one after it, read from its source (untested).
TESTED = ("0.32",)
READ = ("0.33",)
SUPPORTED = TESTED + READ

# Our settings, under "sharedseg" in kv_connector_extra_config.
OPTIONS = {
    "pages": "the page kind: auto, base, thp, hugetlb, hugetlb-2M, hugetlb-1G (default auto)",
    "numa": "none, a node number, interleave or device-local (default none)",
    "populate": "owner, spread, lazy or background (default owner)",
    "populate_threads": "the owner's population threads (default 0: up to 4)",
    "pin": "auto, host_register, vmm or none (default auto: host_register on CUDA, "
           "none on the CPU platform)",
    "timeout": "seconds a rank waits for the others while the segment is made (default 30)",
}
# A file each worker appends one JSON line per transfer to (CPU worker).
TRACE_ENV = "SHAREDSEG_VLLM_TRACE"
# Under vLLM's logger, whose handler prints in every worker.
_log = logging.getLogger("vllm.kv_offload.sharedseg")


def _version() -> Tuple[str, str]:
    full = getattr(vllm, "__version__", "unknown")
    return full, ".".join(full.split("+")[0].split(".")[:2])


def _names() -> Tuple[Dict[str, Any], List[str]]:
    """vLLM's names this module uses, and those this vLLM lacks."""
    wanted = {
        "vllm.v1.kv_offload.base": ("OffloadingSpec", "OffloadingWorker", "TransferResult",
                                    "GPULoadStoreSpec", "CanonicalKVCaches"),
        "vllm.v1.kv_offload.cpu.spec": ("CPUOffloadingSpec",),
        "vllm.v1.kv_offload.cpu.gpu_worker": ("CPUOffloadingWorker", "pin_mmap_region"),
        "vllm.v1.kv_offload.cpu.shared_offload_region": ("SharedOffloadRegion",),
        "vllm.v1.kv_offload.cpu.common": ("CPULoadStoreSpec",),
        "vllm.platforms": ("current_platform",),
        "vllm.distributed.parallel_state": ("get_tp_group",),
    }
    found: Dict[str, Any] = {}
    missing: List[str] = []
    for module, names in wanted.items():
        try:
            mod = __import__(module, fromlist=list(names))
        except Exception as e:  # an import error inside vLLM is a difference too
            missing += [f"{module} ({type(e).__name__}: {e})"]
            continue
        for name in names:
            if hasattr(mod, name):
                found[name] = getattr(mod, name)
            else:
                missing.append(f"{module}.{name}")
    return found, missing


_VLLM, _MISSING = _names()


def check_version() -> None:
    """Raises RuntimeError, in a sentence, when the installed vLLM is not one
    this module is written for, or lacks a name it uses."""
    full, minor = _version()
    if minor not in SUPPORTED:
        raise RuntimeError(
            f"sharedseg.vllm supports vLLM {', '.join(SUPPORTED)} (tested on {', '.join(TESTED)}); "
            f"this is vLLM {full}, whose offloading API (SharedOffloadRegion, CPUOffloadingSpec, "
            f"CPUOffloadingWorker) it has not been checked against")
    if _MISSING:
        raise RuntimeError(f"sharedseg.vllm needs names that vLLM {full} does not have: "
                           f"{', '.join(_MISSING)}")


def parse_options(extra_config: Mapping[str, Any]) -> Dict[str, Any]:
    """Our settings from kv_connector_extra_config["sharedseg"], checked:
    ValueError names an unknown or malformed one."""
    stray = sorted(k for k in extra_config if k.startswith("sharedseg") and k != "sharedseg")
    if stray:
        raise ValueError(f"kv_connector_extra_config has {', '.join(map(repr, stray))}: "
                         f"sharedseg's settings go in one object, \"sharedseg\": {{...}} "
                         f"(known: {', '.join(OPTIONS)})")
    given = extra_config.get("sharedseg", {}) or {}
    if not isinstance(given, Mapping):
        raise ValueError(f"kv_connector_extra_config[\"sharedseg\"] must be an object of "
                         f"settings ({', '.join(OPTIONS)}), not {type(given).__name__}")
    unknown = sorted(set(given) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown sharedseg setting{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))} in kv_connector_extra_config; "
                         f"known: " + "; ".join(f"{k}: {v}" for k, v in OPTIONS.items()))
    options = dict(pages=None, numa=None, populate=None, populate_threads=0, pin="auto",
                   timeout=None)
    options.update(given)
    threads = options["populate_threads"]
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(f"sharedseg setting populate_threads={threads!r}: expected an "
                         f"integer >= 0")
    return options


def _platform() -> str:
    """PINNING_PLATFORM (CUDA), "cpu", or the name of a platform this module
    does not serve."""
    p = _VLLM["current_platform"]
    if p.is_cuda():
        return PINNING_PLATFORM
    if p.is_cpu():
        return "cpu"
    return str(getattr(p, "device_name", None) or type(p).__name__)


def _segment_name(engine_id: str) -> str:
    """The segment's name: vLLM's engine id, which every worker of one engine
    shares and two engines do not."""
    name = f"vllm-{engine_id}"
    return name if len(name.encode()) <= 63 else f"vllm-{zlib.crc32(engine_id.encode()):08x}"


if "SharedOffloadRegion" in _VLLM and "CPUOffloadingSpec" in _VLLM:
    _Region = _VLLM["SharedOffloadRegion"]
    _Spec = _VLLM["CPUOffloadingSpec"]
else:  # the spec then fails in __init__ with check_version's sentence
    _Region = object
    _Spec = _VLLM.get("OffloadingSpec", object)


class SharedSegRegion(_Region):  # type: ignore[misc, valid-type]
    """vLLM's SharedOffloadRegion over a sharedseg segment: the same views
    (create_next_worker_view, create_next_canonical_view,
    create_kv_memoryview, base_tensor), made by vLLM's own methods, over
    memory that no file names. Every rank of the group constructs it
    together (a collective)."""

    BLOCK_SIZE_ALIGNMENT = 4096

    def __init__(self, *, name: str, group: Any, num_chunks: int, row_stride: int,
                 slot: Optional[int], slot_bytes: int, args: Dict[str, Any]):
        # Not SharedOffloadRegion.__init__: it makes the /dev/shm file. These
        # are the attributes its view methods and vLLM's worker read.
        self.segment = region_segment(name, group, num_chunks, row_stride, args)
        self.page_size = self.BLOCK_SIZE_ALIGNMENT
        self.num_chunks = num_chunks
        self._row_stride = row_stride
        self.total_size_bytes = num_chunks * row_stride
        self.cpu_page_size = slot_bytes
        self.rank = slot
        if slot is not None:
            self._worker_offset = slot * slot_bytes
            self._worker_area_end = (slot + 1) * slot_bytes
        self._creator = False
        self.fd = None
        self.mmap_obj = None
        self._segments: List[Any] = []
        self._base = torch.frombuffer(self.segment.buffer(), dtype=torch.int8)
        self._views: List[torch.Tensor] = []
        self._canonical_offset = 0
        # Pinned by sharedseg (registration or VMM memory): vLLM's worker
        # must not register it again, nor unregister it.
        facts = self.segment.info
        self.is_pinned = bool(facts.get("pinned"))
        self.pinned_addresses: List[int] = []
        _log.info("sharedseg region '%s': %d chunks of %d bytes (%s), %s pages of %d bytes, "
                  "%s; rank %d of %d%s", name, num_chunks, row_stride,
                  "one copy" if row_stride < 2 * slot_bytes else "a slot per rank",
                  facts["pages"], facts["page_size"],
                  "pinned" if self.is_pinned else "not pinned", self.segment.rank,
                  self.segment.world_size, ", the owner" if self.segment.is_owner else "")

    def cleanup(self) -> None:
        """Drops the views and closes the segment; the pages go with the last
        rank's mapping (sharedseg synchronises a pinned segment's device first)."""
        if self._views is not None:
            self._views.clear()
        self._base = None
        self.is_pinned = False
        self.segment.close()


def _pinned_by_sharedseg(run: Any) -> Any:
    """Runs run() with vLLM's pin_mmap_region leaving our regions alone:
    sharedseg pinned them already, once for the group, or was told not to."""
    from vllm.v1.kv_offload.cpu import gpu_worker
    vllm_pin = gpu_worker.pin_mmap_region

    def pin(region: Any, *args: Any, **kwargs: Any) -> None:
        if not isinstance(region, SharedSegRegion):
            vllm_pin(region, *args, **kwargs)

    gpu_worker.pin_mmap_region = pin
    try:
        return run()
    finally:
        gpu_worker.pin_mmap_region = vllm_pin


class SharedSegOffloadingSpec(_Spec):  # type: ignore[misc, valid-type]
    """vLLM's CPUOffloadingSpec with its region in one sharedseg segment."""

    def __init__(self, config: Any):
        check_version()
        self.sharedseg_options = parse_options(config.extra_config)
        super().__init__(config)
        self._platform = _platform()
        if self._platform not in (PINNING_PLATFORM, "cpu"):
            raise RuntimeError(f"sharedseg.vllm serves vLLM's CUDA and CPU platforms; this "
                               f"vLLM runs on {self._platform}")
        self._segment_args = segment_args(self.sharedseg_options, self._platform)

    def _uses_shared_region(self) -> bool:
        return True  # one segment per group, on every platform served

    def _group(self) -> Any:
        parallel = self.config.parallel
        if parallel.world_size != parallel.tp_size:
            raise RuntimeError(
                f"sharedseg.vllm shares the region over the TP group; this engine's "
                f"{parallel.world_size} workers are not one TP group of {parallel.tp_size} "
                f"(pipeline, context or data parallel axes are not supported yet)")
        return _VLLM["get_tp_group"]()

    def create_region(self) -> SharedSegRegion:
        """The group's region (a collective over the TP group)."""
        if self.num_chunks <= 0:
            raise ValueError(f"cpu_bytes_to_use={self.extra_config.get('cpu_bytes_to_use')} "
                             f"holds no chunk of {self.kv_bytes_per_chunk} bytes")
        parallel = self.config.parallel
        slot = 0 if self.replicated_layout else parallel.rank
        return SharedSegRegion(name=_segment_name(self.config.engine_id), group=self._group(),
                               num_chunks=self.num_chunks, row_stride=self.kv_bytes_per_chunk,
                               slot=slot, slot_bytes=self.cpu_page_size_per_worker,
                               args=self._segment_args)

    def create_worker(self, kv_caches: Any) -> Any:
        if self.config.canonical_layout and self._platform == "cpu":
            raise ValueError("canonical_layout is not supported by sharedseg's CPU worker "
                             "(its copies follow vLLM's direct layout)")
        region = self.create_region()
        try:
            if self._platform == "cpu":
                return SharedSegCPUWorker(kv_caches, self.blocks_per_chunk, region)
            return _pinned_by_sharedseg(lambda: _VLLM["CPUOffloadingWorker"](
                kv_caches=kv_caches, blocks_per_chunk=self.blocks_per_chunk,
                num_cpu_chunks=self.num_chunks, mmap_region=region))
        except BaseException:
            region.cleanup()
            raise

    def get_worker(self, kv_caches: Any) -> Any:
        if not self._worker:
            self._worker = self.create_worker(kv_caches)
        return self._worker


def _flat_sub_blocks(block_ids: np.ndarray, per_chunk: int, count: int, skip: int) -> np.ndarray:
    """The flat sub-block index (chunk * per_chunk + position) of each of
    count consecutive blocks starting skip sub-blocks into block_ids[0]."""
    ids = block_ids.astype(np.int64)
    flat = (ids[:, None] * per_chunk + np.arange(per_chunk, dtype=np.int64)).ravel()
    return flat[skip:skip + count]


class SharedSegCPUWorker(_VLLM.get("OffloadingWorker", object)):  # type: ignore[misc]
    """Moves KV blocks between vLLM's CPU KV cache and the segment, in the
    direct layout vLLM's CUDA worker uses: chunk c's row holds this rank's
    slot, and in it each tensor's page for each of the chunk's blocks.
    Copies run in submit_store/submit_load (the CPU has no copy engine to
    overlap with); get_finished reports them."""

    def __init__(self, kv_caches: Any, blocks_per_chunk: int, region: SharedSegRegion):
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
        self._rank = region.segment.rank
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
        result = _VLLM["TransferResult"]
        self._done.append(result(job_id=job_id, success=True, transfer_size=moved,
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
