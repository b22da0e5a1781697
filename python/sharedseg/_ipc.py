# SPDX-License-Identifier: Apache-2.0
"""Segment views and torch's own sharing. torch.multiprocessing sends a CPU
tensor by moving its storage into fresh shared memory (a copy), and
Tensor.share_memory_() does the same in place: the tensor then silently
stops aliasing the segment. A view's storage is exactly one entry of the
segment's layout, which the C library's registry recognises
(sseg_lookup), so:

- pickling a segment view for torch.multiprocessing (Queue, Pipe, spawn
  arguments) raises, saying what to send instead;
- Tensor.share_memory_() on a segment view (or a view of one) is a no-op:
  its pages already are shared memory.

Both hooks are installed when the first tensors() is made, and let every
other tensor through to torch's own code unchanged.

The supported way to give another process the data is to have it be a
rank of the group (it calls create_shared_segment with the same name) and
to send the block name and entry index, or offsets()."""
import sys
from typing import Any, Optional

from . import _native
from ._native import SharedSegmentError

_installed = False


def segment_of(tensor: Any) -> Optional[str]:
    """The memfd name of the segment whose entry tensor's storage is, else None."""
    if getattr(tensor, "device", None) is None or tensor.device.type != "cpu":
        return None
    # torch 2.x: untyped_storage(); 1.13: storage() (deprecated in 2.x).
    storage = tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage()
    if not storage.nbytes():
        return None
    return _native.lookup(storage.data_ptr(), storage.nbytes())


def _refusing(original):
    def reduce(tensor, *args, **kwargs):
        name = segment_of(tensor)
        if name is not None:
            label = f"'{name.rsplit('sseg:', 1)[-1]}'" if name else "(unnamed)"
            raise SharedSegmentError(
                f"this tensor is a view of sharedseg segment {label}: sending "
                f"it through torch.multiprocessing would copy it into new shared memory, and "
                f"the tensor would stop aliasing the segment. Have the receiving process join "
                f"the group (create_shared_segment with the same name) and send it the block "
                f"name and entry index (or seg.offsets()) instead")
        return original(tensor, *args, **kwargs)
    reduce.sharedseg = True
    return reduce


def _keeping_segment_views(original):
    def share_memory_(self, *args, **kwargs):
        if segment_of(self) is not None:
            return self
        return original(self, *args, **kwargs)
    share_memory_.sharedseg = True
    share_memory_.__doc__ = original.__doc__
    return share_memory_


def install() -> None:
    """Wraps torch.multiprocessing's tensor reducers and Tensor.share_memory_
    (once, when the first tensors() is made)."""
    global _installed
    if _installed:
        return
    import torch
    if not getattr(torch.Tensor.share_memory_, "sharedseg", False):
        torch.Tensor.share_memory_ = _keeping_segment_views(torch.Tensor.share_memory_)
    if "torch.multiprocessing.reductions" in sys.modules:
        from multiprocessing.reduction import ForkingPickler
        reducers = ForkingPickler._extra_reducers
        for cls in (torch.Tensor, torch.nn.parameter.Parameter):
            original = reducers.get(cls)
            if original is not None and not getattr(original, "sharedseg", False):
                reducers[cls] = _refusing(original)
    _installed = True
