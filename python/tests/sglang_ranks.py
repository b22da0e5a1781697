# SPDX-License-Identifier: Apache-2.0
"""Ranks of a gloo group, with SGLang's own GroupCoordinator over it, that
build SGLang's real MLATokenToKVPoolHost on CPU with sharedseg's allocator
installed (sharedseg.sglang.install). Each rank writes what it saw to
OUT/rank<N>.json; test_sglang.py asserts on them.

    python sglang_ranks.py LAYOUTS WORLD PORT OUT    (LAYOUTS: comma-separated,
                                                     and "disagree": the ranks
                                                     ask for other sizes)

The pool's device<->host copies call sgl_kernel's CUDA transfer kernels,
which SGLang binds only on CUDA and XPU: backup and load here go through
torch stand-ins for transfer_kv_direct and its page-first variants (below),
set in SGLang's module where the kernels would be. They say nothing about
the kernels, only that the pool's host side is the shared segment.
"""

import os

import torch
import torch.distributed as dist

import engine_ranks

LAYERS, TOKENS, PAGE = 2, 256, 16


def standins(mla):
    """torch versions of the sgl_kernel copies the "direct" io backend uses."""
    def transfer_kv_direct(src_layers, dst_layers, src_indices, dst_indices, page_size):
        for src, dst in zip(src_layers, dst_layers):
            dst[dst_indices] = src[src_indices]

    def per_layer_direct_pf_lf(src_ptrs, dst_ptrs, src_indices, dst_indices, layer_id, page_size):
        (host,), (device,) = src_ptrs, dst_ptrs
        device[dst_indices] = host[src_indices // page_size, layer_id, src_indices % page_size]

    def all_layer_direct_lf_pf(src_ptrs, dst_ptrs, src_indices, dst_indices, page_size):
        (host,) = dst_ptrs
        for layer, device in enumerate(src_ptrs):
            host[dst_indices // page_size, layer, dst_indices % page_size] = device[src_indices]

    mla.transfer_kv_direct = transfer_kv_direct
    mla.transfer_kv_per_layer_direct_pf_lf = per_layer_direct_pf_lf
    mla.transfer_kv_all_layer_direct_lf_pf = all_layer_direct_lf_pf


def latent(layer, generator_seed):
    g = torch.Generator().manual_seed(generator_seed + layer)
    return torch.randn(TOKENS, 1, 576, generator=g).to(torch.bfloat16)


def coordinator(rank, world):
    from sglang.srt.distributed.parallel_state import GroupCoordinator
    return GroupCoordinator(group_ranks=[list(range(world))], local_rank=rank,
                            torch_distributed_backend="gloo", use_pynccl=False,
                            use_mscclpp=False, use_custom_allreduce=False,
                            use_torch_symm_mem_all_reduce=False, use_hpu_communicator=False,
                            use_xpu_communicator=False, group_name="tp")


def pool(layout, ratio=2.0):
    from sglang.srt.mem_cache.device_pool_info import MLABufferInfo
    from sglang.srt.mem_cache.pool_host.base import host_memory_budget_scope
    from sglang.srt.mem_cache.pool_host.mla import MLATokenToKVPoolHost
    device = tuple(latent(layer, 7) for layer in range(LAYERS))  # the same KV in every rank
    info = MLABufferInfo(buffers=device, data_ptrs=torch.tensor([b.data_ptr() for b in device]),
                         layer_indices=tuple(range(LAYERS)), device_layer_num=LAYERS,
                         page_size=PAGE, kv_lora_rank=512, qk_rope_head_dim=64,
                         kv_cache_dim=576, dtype=torch.bfloat16, device=torch.device("cpu"))
    # SGLang books a pool against MemAvailable less a 10 GiB reserve: a
    # budget of our own keeps this 1 MiB pool from failing where other
    # processes (copies of this test) hold the host's memory.
    with host_memory_budget_scope(1 << 30):
        host = MLATokenToKVPoolHost(info, host_to_device_ratio=ratio, host_size=0,
                                    page_size=PAGE, layout=layout, pin_memory=False,
                                    device="cpu", device_capacity_tokens=TOKENS, start_layer=0,
                                    end_layer=LAYERS, target_layer_num=LAYERS)
    return host, device


def shared(rank, world, layout, group):
    import sharedseg
    import sharedseg.sglang as adapter
    from sglang.srt.mem_cache.pool_host import mla
    made = []

    def make():
        # A name of this run's own: copies of the test may run at once.
        made.append(adapter.SharedSegHostTensorAllocator(group, pages="base",
                                                         name=f"sglang-{os.getppid()}"))
        return made[-1]

    adapter.install(make)
    standins(mla)
    host, device = pool(layout)
    seg = made[0].segments[0]
    lo, hi = seg.base_addr(), seg.base_addr() + seg.total_size()
    seen = dict(allocators=len(made), segments=len(made[0].segments),
                inside=lo <= host.kv_buffer.data_ptr() < hi,
                pool_bytes=host.kv_buffer.nbytes, segment_size=seg.total_size())
    listed = [s for s in sharedseg.list_segments() if s["name"] == seg.name]
    seen["listed"] = [dict(world_size=s["world_size"], processes=len(s["processes"]))
                      for s in listed]
    # alloc is the same on every rank (the same calls, the same state).
    indices = host.alloc(2 * PAGE)
    seen["indices"] = indices.tolist()
    first, second = int(indices[0]), int(indices[PAGE])
    # A page written by rank 0 is read, byte for byte, by every rank.
    page = torch.arange(host.get_data_page(first).numel()).remainder(97).to(torch.bfloat16)
    if rank == 0:
        host.set_from_flat_data_page(first, page)
    group.barrier()
    seen["page_from_rank0"] = bool(torch.equal(host.get_data_page(first).view(torch.int16),
                                               page.view(torch.int16)))
    if layout in ("layer_first", "page_first_direct"):
        # Rank 0 backs the device rows up into the second page; every rank
        # loads that page into rows of its own device buffers.
        rows = torch.arange(32, 32 + PAGE)
        host_rows = indices[PAGE:2 * PAGE]
        if rank == 0:
            host.backup_from_device_all_layer(None, host_rows, rows, "direct")
        group.barrier()
        for layer in range(LAYERS):
            device[layer][100:100 + PAGE].zero_()
            host.load_to_device_per_layer(None, host_rows, torch.arange(100, 100 + PAGE),
                                          layer, "direct")
        seen["loaded_rank0_rows"] = all(
            torch.equal(device[layer][100:100 + PAGE].view(torch.int16),
                        latent(layer, 7)[32:32 + PAGE].view(torch.int16))
            for layer in range(LAYERS))
    seen["second_page_index"] = second
    group.barrier()
    name = seg.name
    del host, seg
    for a in made:
        a.close()
    adapter.uninstall()
    group.barrier()
    seen["left"] = [s["name"] for s in sharedseg.list_segments() if s["name"] == name]
    from sglang.srt.mem_cache.pool_host import base
    seen["uninstalled"] = not getattr(base.get_allocator_from_storage, "sharedseg", False)
    return seen


def disagree(rank, world, group):
    import sharedseg
    import sharedseg.sglang as adapter
    adapter.install(lambda: adapter.SharedSegHostTensorAllocator(
        group, pages="base", name=f"sglang-{os.getppid()}"))
    try:
        pool("layer_first", ratio=2.0 + rank)
        return dict(error=None)
    except Exception as e:
        return dict(error=f"{type(e).__name__}: {e}",
                    is_sharedseg=isinstance(e, sharedseg.SharedSegmentError))


def rank_main(rank, layouts, world, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    group = coordinator(rank, world)
    return {name: disagree(rank, world, group) if name == "disagree" else
            shared(rank, world, name, group) for name in layouts.split(",")}


if __name__ == "__main__":
    engine_ranks.main(rank_main)
