# SPDX-License-Identifier: Apache-2.0
"""sharedseg.vllm's region and spec held to vLLM's own classes (issue 30's
contract): SharedSegRegion skips SharedOffloadRegion.__init__ and sets its
state itself, so these tests build vLLM's real region (its /dev/shm file,
unlinked at its barrier as vLLM's spec does it) beside ours over the same
shape and compare what vLLM's code reads:

- every attribute in vars() of vLLM's region is in vars() of ours, with the
  same type and value, except the differences by design in DIFFERENCES;
- every name vLLM's worker, pin_mmap_region, spec and tiering manager read
  on a region (found in their source, not listed by hand) exists on ours,
  a method with vLLM's signature;
- the views vLLM's own methods make have the same shapes, strides, dtypes
  and offsets on both;
- the spec methods we override, and the worker calls we make or serve,
  keep vLLM's signatures.

A vLLM release that adds, renames or retypes any of these fails here, not
in a user's engine."""
import ast
import contextlib
import inspect
import mmap
import os
import uuid

import pytest

pytestmark = pytest.mark.engine

PAGE = mmap.PAGESIZE
# (num_chunks, row_stride, slot, slot_bytes): the direct layout's slot 1
# of 2, the replicated layout's one copy, and a region with no slot (the
# scheduler side's, in vLLM's tiering spec).
SHAPES = {"direct": (4, 2 * PAGE, 1, PAGE), "replicated": (3, 2 * PAGE, 0, 2 * PAGE),
          "no-slot": (2, PAGE, None, PAGE)}

# vLLM's attribute: (its type there, its type here, why).
DIFFERENCES = {
    "mmap_path": (str, type(None), "no file names our memory: it is one segment of the "
                                   "group, made by a collective, not a file in /dev/shm"),
    "fd": (int, type(None), "no file: the library holds the segment's memory"),
    "mmap_obj": (mmap.mmap, type(None), "the library maps the segment; _base is over its "
                                        "buffer, and the segment's close unmaps it"),
}
# vLLM 0.33's, beside those.
DIFFERENCES_033 = {
    "_segments": (list, list, "0.33's files beneath its one mapping, (path, offset, length) "
                              "each: none here, so []; read by _unlink, for a region that made "
                              "files, and by iter_worker_slot_ranges, which ours overrides"),
}
# Ours alone, and why.
OURS_ONLY = {
    "segment": "the sharedseg segment that the region maps",
    "cpu_page_size": "the slot's bytes, which sharedseg's CPU worker (SharedSegCPUWorker) reads "
                     "(vLLM 0.32 keeps them only inside _worker_area_end; 0.33 sets it too)",
}
# Where vLLM's code reads a region, and the names it reads it by.
READERS = ("vllm.v1.kv_offload.cpu.gpu_worker", "vllm.v1.kv_offload.cpu.spec",
           "vllm.v1.kv_offload.tiering.manager")
REGION_NAMES = ("region", "mmap_region", "_mmap_region")
# What those readers read in 0.32: the source scan must find at least these.
READ_IN_032 = {"_base", "total_size_bytes", "_row_stride", "rank", "pinned_addresses",
               "is_pinned", "create_next_worker_view", "create_next_canonical_view",
               "create_kv_memoryview", "cleanup"}
# Spec methods of ours that vLLM's CPUOffloadingSpec does not have, and why.
SPEC_OURS_ONLY = {"create_region": "vLLM 0.32 builds its region inside create_worker; "
                                   "ours is a collective over the TP group, in its own method"}


def vllm_region(num_chunks, row_stride, slot, slot_bytes):
    from vllm.v1.kv_offload.cpu.shared_offload_region import SharedOffloadRegion
    return SharedOffloadRegion(engine_id=f"sharedseg-contract-{uuid.uuid4().hex}",
                               num_chunks=num_chunks, rank=slot, kv_bytes_per_chunk=row_stride,
                               cpu_page_size=slot_bytes, barrier=lambda: None)


def our_region(num_chunks, row_stride, slot, slot_bytes):
    from sharedseg.engines.base import SegmentRequest
    from sharedseg.vllm import SharedSegRegion
    return SharedSegRegion(name=f"vllm-contract-{uuid.uuid4().hex[:12]}", group=None,
                           num_chunks=num_chunks, row_stride=row_stride, slot=slot,
                           slot_bytes=slot_bytes,
                           request=SegmentRequest(pages="base").on("cpu"))


@contextlib.contextmanager
def both(shape):
    """vLLM's region and ours over one shape; both cleaned up, and vLLM's
    file gone (its barrier unlinks it, its cleanup closes the rest)."""
    theirs = vllm_region(*SHAPES[shape])
    try:
        ours = our_region(*SHAPES[shape])
        try:
            yield theirs, ours
        finally:
            ours.cleanup()
    finally:
        path = theirs.mmap_path
        theirs.cleanup()
        assert not os.path.exists(path)


def differences():
    from sharedseg.vllm import ENGINE
    return {**DIFFERENCES, **(DIFFERENCES_033 if ENGINE.release() == "0.33" else {})}


def ours_only():
    from sharedseg.vllm import ENGINE
    return set(OURS_ONLY) - ({"cpu_page_size"} if ENGINE.release() == "0.33" else set())


@pytest.mark.parametrize("shape", SHAPES)
def test_our_region_has_every_attribute_of_vllms_with_its_type(shape):
    differ = differences()
    with both(shape) as (theirs, ours):
        mine = vars(ours)
        for name, value in vars(theirs).items():
            assert name in mine, f"vLLM's region has {name!r}; SharedSegRegion has not"
            if name in differ:
                there, here, _ = differ[name]
                assert (type(value), type(mine[name])) == (there, here), name
                continue
            assert type(mine[name]) is type(value), (name, type(mine[name]), type(value))
            if name not in ("_base", "_views"):  # compared by test_views_...
                assert mine[name] == value, (name, mine[name], value)
        assert set(mine) - set(vars(theirs)) == ours_only()
        assert set(differ) <= set(vars(theirs)), "a difference vLLM no longer has"


def _region_reads(module_name):
    """The names read on a region in a vLLM module's source: attributes of
    a name (or self attribute) called like one of REGION_NAMES."""
    import importlib
    tree = ast.parse(inspect.getsource(importlib.import_module(module_name)))
    reads = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        holder = node.value
        name = holder.id if isinstance(holder, ast.Name) else \
            holder.attr if isinstance(holder, ast.Attribute) else None
        if name in REGION_NAMES:
            reads.add(node.attr)
    return reads


def _parameters(function):
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def test_every_name_vllm_reads_on_a_region_is_on_ours_with_its_signature():
    from vllm.v1.kv_offload.cpu.shared_offload_region import SharedOffloadRegion
    from sharedseg.vllm import SharedSegRegion
    reads = set().union(*map(_region_reads, READERS))
    assert READ_IN_032 <= reads, f"the source scan missed {sorted(READ_IN_032 - reads)}"
    with both("direct") as (theirs, ours):
        for name in sorted(reads):
            assert hasattr(ours, name), f"vLLM reads region.{name}; SharedSegRegion has none"
            declared = inspect.getattr_static(SharedOffloadRegion, name, None)
            if declared is None:
                assert name in vars(theirs) and name in vars(ours), name
            elif isinstance(declared, property):
                assert isinstance(inspect.getattr_static(SharedSegRegion, name), property), name
            elif callable(declared):
                assert _parameters(getattr(SharedSegRegion, name)) == _parameters(declared), name


def _view_facts(view):
    return (tuple(view.shape), view.stride(), view.dtype, view.storage_offset())


@pytest.mark.parametrize("shape", ["direct", "replicated"])
def test_views_from_vllms_methods_match(shape):
    _, _, _, slot_bytes = SHAPES[shape]
    with both(shape) as (theirs, ours):
        for size in (slot_bytes // 2, slot_bytes // 4, slot_bytes // 4):
            assert _view_facts(ours.create_next_worker_view(size)) == \
                _view_facts(theirs.create_next_worker_view(size))
        with pytest.raises(AssertionError, match="exceeds worker area end"):
            ours.create_next_worker_view(1)
        assert ours._worker_offset == theirs._worker_offset


@pytest.mark.parametrize("shape", SHAPES)
def test_canonical_views_memoryview_and_base_tensor_match(shape):
    _, row_stride, _, _ = SHAPES[shape]
    with both(shape) as (theirs, ours):
        for size in (row_stride // 2, row_stride // 4):
            assert _view_facts(ours.create_next_canonical_view(size)) == \
                _view_facts(theirs.create_next_canonical_view(size))
        assert _view_facts(ours.base_tensor) == _view_facts(theirs.base_tensor)
        mine, vllms = ours.create_kv_memoryview(), theirs.create_kv_memoryview()
        assert (mine.shape, mine.strides, mine.format, mine.nbytes) == \
            (vllms.shape, vllms.strides, vllms.format, vllms.nbytes)
        del mine, vllms


def test_the_spec_methods_we_override_keep_vllms_signatures():
    from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec
    from sharedseg.vllm import SharedSegOffloadingSpec
    for name in ("create_region", "create_worker", "get_worker", "_uses_shared_region"):
        assert name in vars(SharedSegOffloadingSpec), f"{name} is no override of ours"
        theirs = getattr(CPUOffloadingSpec, name, None)
        if theirs is None:
            assert name in SPEC_OURS_ONLY, f"vLLM's spec has no {name}"
            continue
        assert name not in SPEC_OURS_ONLY, f"vLLM's spec now has {name}: compare it"
        assert _parameters(getattr(SharedSegOffloadingSpec, name)) == _parameters(theirs), name


def test_the_worker_calls_we_make_bind_to_vllms_signatures():
    """Our spec builds CPUOffloadingWorker by keyword; vLLM's worker calls
    pin_mmap_region(region)."""
    from vllm.v1.kv_offload.cpu import gpu_worker
    inspect.signature(gpu_worker.CPUOffloadingWorker).bind(
        kv_caches=None, blocks_per_chunk=1, num_cpu_chunks=0, mmap_region=None)
    inspect.signature(gpu_worker.pin_mmap_region).bind(None)


def _accepts_calls_of(ours, theirs):
    """Every call vLLM's signature allows binds to ours: its parameters
    first, any more of ours with a default."""
    mine, vllms = _parameters(ours), _parameters(theirs)
    return mine[:len(vllms)] == vllms and \
        all(default is not inspect.Parameter.empty for _, _, default in mine[len(vllms):])


def test_our_cpu_worker_serves_vllms_worker_interface():
    """sharedseg's CPU worker, where vLLM has none, takes every call
    vLLM's connector makes on an OffloadingWorker (submit_load's expedited
    is 0.33's, defaulted)."""
    from vllm.v1.kv_offload.base import OffloadingWorker
    from sharedseg.engines.vllm.cpu_worker import SharedSegCPUWorker
    for name in ("submit_store", "submit_load", "get_finished", "wait", "shutdown"):
        assert _accepts_calls_of(getattr(SharedSegCPUWorker, name),
                                 getattr(OffloadingWorker, name)), name
