# SPDX-License-Identifier: Apache-2.0
"""One program written against mooncake.shared_segment, run unchanged on
either package (the module's name is the only argument that differs):
test_segment_compat.py runs it on both and compares what each rank saw.

    python segment_compat.py MODULE WORLD PORT OUT    MODULE: sharedseg or
                                                      mooncake.shared_segment

Everything below the import is the program: whether the package's
segments work here (shared_segment_supported), Mooncake's positional call
over a gloo group, the owner writing, every rank reading, then the errors
a program meets (a block that is none, ranks that disagree, a view of a
block not declared), each caught as the package's SharedSegmentError."""
import importlib
import os
import zlib

import torch
import torch.distributed as dist

import engine_ranks


def program(create_shared_segment, SharedSegmentError, shared_segment_supported, rank, world,
            group):
    # Host-memory segments (the question's other forms ask about each
    # package's device backends, which differ: docs/python.md).
    seen = {"supported": shared_segment_supported()}
    blocks = {
        "k": dict(count=3, shape=(16, 576), dtype=torch.bfloat16),
        "v": dict(count=3, shape=(7,), dtype=torch.float32),
    }
    seg = create_shared_segment(f"compat-{os.getppid()}", blocks, world, rank, 0, None, group)
    k, v = seg.tensors("k"), seg.tensors("v")
    seen["views"] = {name: [[list(t.shape), str(t.dtype), t.is_contiguous(), t.device.type]
                            for t in views] for name, views in (("k", k), ("v", v))}
    seen["sizes"] = [seg.total_size() >= 3 * (16 * 576 * 2 + 7 * 4), type(seg.base_addr()).__name__]
    seen["zero"] = all(not t.any() for t in k + v)
    dist.barrier(group)  # every rank has read zeros before the owner writes
    if rank == 0:
        for i, t in enumerate(k):
            t.copy_(torch.arange(16 * 576, dtype=torch.float32).view(16, 576).mul_(i + 1))
        for i, t in enumerate(v):
            t.fill_(0.5 * i)
    dist.barrier(group)  # the owner has written
    seen["crc"] = [zlib.crc32(t.view(torch.uint8).numpy().tobytes()) for t in k + v]
    dist.barrier(group)  # every rank has read before the segment goes
    del k, v, seg

    def error(call):
        try:
            call()
            return None
        except SharedSegmentError as e:
            return ["SharedSegmentError", isinstance(e, RuntimeError)]

    seen["bad_block"] = error(lambda: create_shared_segment(
        f"compat-bad-{os.getppid()}", {"k": dict(count=0, shape=(4,), dtype=torch.float32)},
        world, rank, 0, None, group))
    seen["disagree"] = error(lambda: create_shared_segment(
        f"compat-differ-{os.getppid()}",
        {"k": dict(count=2, shape=(4 + rank,), dtype=torch.float32)}, world, rank, 0, None, group))
    one = create_shared_segment(f"compat-one-{os.getppid()}",
                                {"k": dict(count=1, shape=(4,), dtype=torch.float32)},
                                world, rank, 0, None, group)
    seen["unknown_block"] = error(lambda: one.tensors("nope"))
    dist.barrier(group)
    return seen


def rank_main(rank, module, world, port):
    mod = importlib.import_module(module)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        return program(mod.create_shared_segment, mod.SharedSegmentError,
                       mod.shared_segment_supported, rank, world, dist.group.WORLD)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    engine_ranks.main(rank_main)
