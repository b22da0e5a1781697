# SPDX-License-Identifier: Apache-2.0
"""vLLM's host KV tier in one sharedseg segment per TP group.

One line of configuration selects it, through vLLM's own factory:

    --kv-transfer-config '{"kv_connector": "OffloadingConnector",
        "kv_role": "kv_both", "kv_connector_extra_config": {
        "spec_name": "SharedSegOffloadingSpec", "spec_module_path": "sharedseg.vllm",
        "cpu_bytes_to_use": 8589934592}}'

Our own settings go under "sharedseg" in kv_connector_extra_config (the
base's settings, sharedseg.engines.base.settings_help()); an unknown one
is an error that names it.

SharedSegOffloadingSpec is vLLM's CPUOffloadingSpec with another region:
one segment over the group's ranks instead of a file in /dev/shm, sized as
vLLM sizes its own (chunks x row stride; one copy for MLA's replicated
layout, else one slot per rank in the same segment), on the page kind and
NUMA node asked for. On CUDA the region goes to vLLM's own
CPUOffloadingWorker and its transfer handlers, pinned by sharedseg (VMM
memory that peers import already pinned, or chunked registration; vLLM's
pin_mmap_region then finds nothing left to register), or with pin "none"
by vLLM's worker as it pins its own region (the region's cleanup undoes
those registrations). On vLLM's CPU platform, which has no KV offloading of
its own, cpu_worker.py's worker copies blocks.

Importing sharedseg never imports this module; this module imports vLLM
(through ENGINE, sharedseg.engines.vllm).
"""
import logging
from typing import Any, Dict, Mapping, Optional

import torch

from . import ENGINE, POOL, SPEC
from ..base import (PINNING_PLATFORM, SETTINGS, SegmentRequest, named_setting, segment_name,
                    sharing, slot_of)
from .cpu_worker import SharedSegCPUWorker
from .rows import region_segment

_SPEC = "vllm.v1.kv_offload.cpu.spec"
_WORKER = "vllm.v1.kv_offload.cpu.gpu_worker"
_REGION = "vllm.v1.kv_offload.cpu.shared_offload_region"
_HOST = "vllm.v1.kv_offload.cpu.host_register"
# Where our settings go, in sentences.
WHERE = 'kv_connector_extra_config["sharedseg"]'
# Under vLLM's logger, whose handler prints in every worker.
_log = logging.getLogger("vllm.kv_offload.sharedseg")


def check_version() -> None:
    """RuntimeError, in a sentence, for a vLLM release this module was not
    checked against, or one that lacks a name it uses."""
    ENGINE.check(SPEC)


def parse_options(extra_config: Mapping[str, Any]) -> SegmentRequest:
    """Our settings from kv_connector_extra_config["sharedseg"], checked:
    ValueError names an unknown or malformed one."""
    stray = sorted(k for k in extra_config if k.startswith("sharedseg") and k != "sharedseg")
    if stray:
        raise ValueError(f"kv_connector_extra_config has {', '.join(map(repr, stray))}: "
                         f"sharedseg's settings go in one object, \"sharedseg\": {{...}} "
                         f"(known: {', '.join(SETTINGS)})")
    return SegmentRequest.parse(extra_config.get("sharedseg"), WHERE, keeps=True)


def _platform() -> str:
    """PINNING_PLATFORM (CUDA), "cpu", or the name of a platform this module
    does not serve."""
    p = ENGINE.get("vllm.platforms.current_platform")
    if p.is_cuda():
        return PINNING_PLATFORM
    if p.is_cpu():
        return "cpu"
    return str(getattr(p, "device_name", None) or type(p).__name__)


_Region = ENGINE.get(f"{_REGION}.SharedOffloadRegion", object)
# Without it the spec fails in __init__ with check_version's sentence.
_Spec = ENGINE.get(f"{_SPEC}.CPUOffloadingSpec", object)


class SharedSegRegion(_Region):  # type: ignore[misc, valid-type]
    """vLLM's SharedOffloadRegion over a sharedseg segment: the same views
    (create_next_worker_view, create_next_canonical_view,
    create_kv_memoryview, base_tensor), made by vLLM's own methods, over
    memory that no file names. Every rank of the group constructs it
    together (a collective).

    Not SharedOffloadRegion.__init__, which makes the /dev/shm file: every
    attribute it sets is set here at once, from _vllm_state, and
    python/tests/test_vllm_contract.py holds that state to vars() of vLLM's
    own region (names and types; the values that differ by design are
    listed there with their reasons). Ours alone: segment, cpu_page_size."""

    def __init__(self, *, name: str, group: Any, num_chunks: int, row_stride: int,
                 slot: Optional[int], slot_bytes: int, request: SegmentRequest,
                 segment: Any = None):
        # segment: one made already (a worker's map of the host pool, pool.py)
        self.segment = segment if segment is not None else region_segment(
            name, group, num_chunks, row_stride, request)
        self.cpu_page_size = slot_bytes
        vars(self).update(self._vllm_state(num_chunks, row_stride, slot, slot_bytes))
        facts = self.segment.info
        _log.info("sharedseg region '%s': %d chunks of %d bytes (%s), %s pages of %d bytes, "
                  "%s; rank %d of %d%s", name, num_chunks, row_stride,
                  sharing(row_stride < 2 * slot_bytes),
                  facts["pages"], facts["page_size"],
                  "pinned" if self.is_pinned else "not pinned", self.segment.rank,
                  self.segment.world_size, ", the owner" if self.segment.is_owner else "")

    def _vllm_state(self, num_chunks: int, row_stride: int, slot: Optional[int],
                    slot_bytes: int) -> Dict[str, Any]:
        """Every attribute vLLM's SharedOffloadRegion.__init__ sets, valued
        for our segment: no file (mmap_path, fd, mmap_obj None), and the
        slot's bounds only with a slot, as vLLM's are only with a rank."""
        # Pinned by sharedseg (VMM memory, or registration): vLLM's
        # pin_mmap_region registers total_size_bytes in chunks and then
        # marks the region pinned, so it is told that nothing is left to
        # register. Unpinned, vLLM's worker pins it as it pins its own
        # region (pin "none" on CUDA), and cleanup() undoes that.
        pinned = bool(self.segment.info.get("pinned"))
        state: Dict[str, Any] = dict(
            page_size=self.BLOCK_SIZE_ALIGNMENT, num_chunks=num_chunks, _row_stride=row_stride,
            total_size_bytes=0 if pinned else num_chunks * row_stride,
            mmap_path=None, _creator=False, fd=None, mmap_obj=None, rank=slot,
            # the chunks only: a host pool's records follow them
            _base=torch.frombuffer(self.segment.buffer(), dtype=torch.int8)[
                :num_chunks * row_stride],
            _views=[], _canonical_offset=0, is_pinned=pinned, pinned_addresses=[])
        if slot is not None:
            state.update(_worker_offset=slot * slot_bytes, _worker_area_end=(slot + 1) * slot_bytes)
        if ENGINE.release() != "0.32":
            # 0.33's files beneath its one mapping, (path, offset, length)
            # each: none here. Read by _unlink (a region that made files)
            # and iter_worker_slot_ranges (below).
            state.update(_segments=[])
        return state

    def iter_worker_slot_ranges(self) -> Any:
        """0.33's pin_mmap_region(worker_slot_only=True) registers these
        ranges, this rank's slot of every row, instead of the whole region:
        none where sharedseg pinned the segment already (as total_size_bytes
        is 0 for the whole-region path), else vLLM's own."""
        if self.segment.info.get("pinned"):
            return iter(())
        return super().iter_worker_slot_ranges()

    def cleanup(self) -> None:
        """Undoes the host registrations vLLM's pin_mmap_region made on our
        mapping (pinned_addresses, as vLLM's own region does), drops the
        views and closes the segment; the pages go with the last rank's
        mapping (sharedseg synchronises a segment it pinned first)."""
        unregister = ENGINE.get(f"{_HOST}.host_unregister")
        for address in reversed(self.pinned_addresses):
            unregister(address)
        self.pinned_addresses.clear()
        self.is_pinned = False
        if self._views is not None:
            self._views.clear()
        self._base = None
        self.segment.close()


class SharedSegOffloadingSpec(_Spec):  # type: ignore[misc, valid-type]
    """vLLM's CPUOffloadingSpec with its region in one sharedseg segment."""

    def __init__(self, config: Any):
        check_version()
        request = parse_options(config.extra_config)
        super().__init__(config)
        self._platform = _platform()
        if self._platform not in (PINNING_PLATFORM, "cpu"):
            raise RuntimeError(f"sharedseg.vllm serves vLLM's CUDA and CPU platforms; this "
                               f"vLLM runs on {self._platform}")
        self.sharedseg_request = request.on(self._platform)
        # vLLM builds the spec once the model is loaded and the KV cache
        # sized, the first moment the region's size is known: what can
        # never fit is refused here, in every process of the engine alike.
        self.sharedseg_request.check_fits(self.num_chunks * self.kv_bytes_per_chunk,
                                          "cpu_bytes_to_use",
                                          self.extra_config.get("cpu_bytes_to_use"))

    def _uses_shared_region(self) -> bool:
        return True  # one segment per group, on every platform served

    def get_manager(self) -> Any:
        """vLLM's manager; with pool or keep, one over the host pool
        (pool.py), which every engine that names the pool shares and a
        keeper holds between engines."""
        request = self.sharedseg_request
        if not (request.pool or request.keep):
            return super().get_manager()
        if not self._manager:
            from . import pool
            ENGINE.check(POOL)
            self._manager = pool.pool_manager(request, self.config, self.kv_bytes_per_chunk,
                                              self.num_chunks)
        return self._manager

    def _group(self) -> Any:
        parallel = self.config.parallel
        if parallel.world_size != parallel.tp_size:
            raise RuntimeError(
                f"sharedseg.vllm shares the region over the TP group; this engine's "
                f"{parallel.world_size} workers are not one TP group of {parallel.tp_size} "
                f"(pipeline, context or data parallel axes are not supported yet)")
        return ENGINE.get("vllm.distributed.parallel_state.get_tp_group")()

    def create_region(self) -> SharedSegRegion:
        """The group's region (a collective over the TP group); its name is
        vLLM's engine id, which every worker of one engine shares."""
        if self.num_chunks <= 0:
            raise ValueError(f"cpu_bytes_to_use={self.extra_config.get('cpu_bytes_to_use')} "
                             f"holds no chunk of {self.kv_bytes_per_chunk} bytes")
        parallel = self.config.parallel
        slot = slot_of(self.replicated_layout, parallel.rank)
        if self.sharedseg_request.pool or self.sharedseg_request.keep:
            # every engine's workers map the host pool's chunks
            from . import pool
            ENGINE.check(POOL)
            segment = pool.PoolSegment(pool.open_pool(
                self.sharedseg_request, self.config, self.kv_bytes_per_chunk, self.num_chunks,
                map_only=True), parallel.rank, parallel.world_size)
            try:
                return SharedSegRegion(name=segment.name, group=None, num_chunks=self.num_chunks,
                                       row_stride=self.kv_bytes_per_chunk, slot=slot,
                                       slot_bytes=self.cpu_page_size_per_worker,
                                       request=self.sharedseg_request, segment=segment)
            except BaseException:
                segment.close()
                raise
        with named_setting("cpu_bytes_to_use"):
            return SharedSegRegion(name=segment_name("vllm", self.config.engine_id),
                                   group=self._group(), num_chunks=self.num_chunks,
                                   row_stride=self.kv_bytes_per_chunk, slot=slot,
                                   slot_bytes=self.cpu_page_size_per_worker,
                                   request=self.sharedseg_request)

    def create_worker(self, kv_caches: Any) -> Any:
        """The worker over the group's region. A worker with no KV to
        offload (worker_kv_bytes_per_block 0: vLLM sizes no region) gets
        an empty one, as vLLM builds it, and no segment."""
        if self.config.canonical_layout and self._platform == "cpu":
            raise ValueError("canonical_layout is not supported by sharedseg's CPU worker "
                             "(its copies follow vLLM's direct layout)")
        region = self.create_region() if self.config.worker_kv_bytes_per_block > 0 else None
        try:
            if self._platform == "cpu":
                return SharedSegCPUWorker(kv_caches, self.blocks_per_chunk, region)  # vLLM has none
            return ENGINE.get(f"{_WORKER}.CPUOffloadingWorker")(
                kv_caches=kv_caches, blocks_per_chunk=self.blocks_per_chunk,
                num_cpu_chunks=self.num_chunks if region else 0, mmap_region=region)
        except BaseException:
            if region is not None:
                region.cleanup()
            raise

    def get_worker(self, kv_caches: Any) -> Any:
        if not self._worker:
            self._worker = self.create_worker(kv_caches)
        return self._worker
