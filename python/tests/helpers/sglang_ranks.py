# SPDX-License-Identifier: Apache-2.0
"""Ranks started as SGLang's launcher starts its schedulers (spawned
processes), with only the documented switch set (SHAREDSEG_SGLANG in the
environment; the package's entry point visible to importlib.metadata).
Each rank does what a scheduler does before it builds its host pools:
SGLang's load_plugins(), then its groups (a GroupCoordinator over gloo,
stamped as the attention-TP group, as building the groups stamps it);
then builds SGLang's own host pool classes. Each writes what it saw to
OUT/rank<N>.json; test_sglang.py asserts on them.

    python sglang_ranks.py SCENARIOS WORLD PORT OUT

SCENARIOS (comma-separated): mla-LAYOUT (MLATokenToKVPoolHost in a
layout), mha (MHATokenToKVPoolHost), storage (the pool under storage
backends' allocator types), desync (rank 1 refuses its settings once, then
both build again), guard (SGLang's host memory guard, without a budget
scope of our own).

The pools' device<->host copies call sgl_kernel's CUDA kernels, which
SGLang binds only on CUDA and XPU: backup and load go through torch
stand-ins for transfer_kv_direct and its page-first variants (below), set
in SGLang's module where the kernels would be. They say nothing about the
kernels, only that the pool's host side is the shared segment.
"""

import contextlib
import os

import torch
import torch.distributed as dist

import engine_ranks

LAYERS, TOKENS, PAGE = 2, 256, 16
HEADS, DIM = 2, 8
# The guard scenario's host: 16 GiB available, as SGLang reads it.
AVAILABLE = 16 << 30


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


def budget():
    # SGLang books a pool against MemAvailable less a 10 GiB reserve: a
    # budget of our own keeps these small pools from failing where other
    # processes (copies of this test) hold the host's memory.
    from sglang.srt.mem_cache.pool_host.base import host_memory_budget_scope
    return host_memory_budget_scope(1 << 30)


def mla_pool(layout, ratio=2.0, allocator_type="default", scoped=True):
    from sglang.srt.mem_cache.device_pool_info import MLABufferInfo
    from sglang.srt.mem_cache.pool_host.mla import MLATokenToKVPoolHost
    device = tuple(latent(layer, 7) for layer in range(LAYERS))  # the same KV in every rank
    info = MLABufferInfo(buffers=device, data_ptrs=torch.tensor([b.data_ptr() for b in device]),
                         layer_indices=tuple(range(LAYERS)), device_layer_num=LAYERS,
                         page_size=PAGE, kv_lora_rank=512, qk_rope_head_dim=64,
                         kv_cache_dim=576, dtype=torch.bfloat16, device=torch.device("cpu"))
    with budget() if scoped else contextlib.nullcontext():
        host = MLATokenToKVPoolHost(info, host_to_device_ratio=ratio, host_size=0,
                                    page_size=PAGE, layout=layout, pin_memory=False,
                                    device="cpu", allocator_type=allocator_type,
                                    device_capacity_tokens=TOKENS, start_layer=0,
                                    end_layer=LAYERS, target_layer_num=LAYERS)
    return host, device


def mha_pool(rank, ratio=2.0, scoped=True):
    from sglang.srt.mem_cache.device_pool_info import KVBufferLayout, KVBuffers, MHABufferInfo
    from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
    # Each rank's heads differ (tensor parallelism splits them).
    k = tuple(torch.full((TOKENS, HEADS, DIM), 10 * rank + layer, dtype=torch.bfloat16)
              for layer in range(LAYERS))
    v = tuple(t + 100 for t in k)
    buffers = KVBuffers(k=k, v=v, k_data_ptrs=torch.tensor([t.data_ptr() for t in k]),
                        v_data_ptrs=torch.tensor([t.data_ptr() for t in v]),
                        layout=KVBufferLayout.NHD)
    info = MHABufferInfo(buffers=buffers, page_size=PAGE, head_num=HEADS, head_dim=DIM,
                         v_head_dim=DIM, dtype=torch.bfloat16, device=torch.device("cpu"))
    with budget() if scoped else contextlib.nullcontext():
        return MHATokenToKVPoolHost(info, host_to_device_ratio=ratio, host_size=0, page_size=PAGE,
                                    layout="layer_first", pin_memory=False, device="cpu",
                                    device_capacity_tokens=TOKENS, start_layer=0,
                                    end_layer=LAYERS)


def mapping_of(address):
    """The file behind an address in this process (/proc/self/maps): its
    device:inode and path, and the mapping's length."""
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= address < hi:
                return dict(file=f"{fields[3]}:{fields[4]}",
                            path=fields[5].strip() if len(fields) > 5 else "", length=hi - lo)
    return None


def segments_named(prefix, **more):
    """The segments whose name starts with prefix that this process maps
    (copies of a test run at once make segments of the same names): name,
    world size, how many processes map it, and the keys in more (name in
    the listing: name here)."""
    import sharedseg
    return [dict(name=s["name"], world_size=s["world_size"], processes=len(s["processes"]),
                 **{k: s[v] for k, v in more.items()})
            for s in sharedseg.list_segments() if s["name"].startswith(prefix)
            and os.getpid() in [p["pid"] for p in s["processes"]]]


def mla(rank, world, group, layout):
    """SGLang's MLA pool: one segment for the group, every rank's pool the
    same bytes; a page rank 0 sets is every rank's."""
    from sglang.srt.mem_cache.pool_host import mla as mla_module
    standins(mla_module)
    host, device = mla_pool(layout)
    seen = dict(allocator=type(host.allocator).__name__, pool_bytes=host.kv_buffer.nbytes,
                mapping=mapping_of(host.kv_buffer.data_ptr()),
                segments=segments_named("sglang-MLATokenToKVPoolHost"))
    seg = host.allocator.segments[0]
    seen.update(segment=seg.name, segment_size=seg.total_size(),
                at_start=host.kv_buffer.data_ptr() == seg.base_addr())
    indices = host.alloc(2 * PAGE)
    seen["indices"] = indices.tolist()
    first = int(indices[0])
    page = torch.arange(host.get_data_page(first).numel()).remainder(97).to(torch.bfloat16)
    if rank == 0:
        host.set_from_flat_data_page(first, page)
    group.barrier()
    seen["page_from_rank0"] = bool(torch.equal(host.get_data_page(first).view(torch.int16),
                                               page.view(torch.int16)))
    if layout in ("layer_first", "page_first_direct"):
        # Rank 0 backs device rows up into the second page; every rank
        # loads that page into rows of its own device buffers.
        rows, host_rows = torch.arange(32, 32 + PAGE), indices[PAGE:2 * PAGE]
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
    group.barrier()  # nobody closes while another still reads
    name = seg.name
    host.allocator.close()
    del host, seg
    group.barrier()
    seen["left"] = segments_named(name)
    return seen


def mha(rank, world, group):
    """SGLang's MHA pool: each rank's heads differ, so each rank's pool is
    a slot of its own in one segment of the group."""
    host = mha_pool(rank)
    seg = host.allocator.segments[0]
    seen = dict(allocator=type(host.allocator).__name__, pool_bytes=host.kv_buffer.nbytes,
                mapping=mapping_of(host.kv_buffer.data_ptr()), segment_size=seg.total_size(),
                slot=(host.kv_buffer.data_ptr() - seg.base_addr()) // host.kv_buffer.nbytes)
    indices = host.alloc(PAGE)
    first = int(indices[0])
    mine = torch.full_like(host.get_data_page(first), rank + 1)
    host.set_from_flat_data_page(first, mine)
    group.barrier()
    seen["own_page_kept"] = bool(torch.equal(host.get_data_page(first), mine))
    group.barrier()
    host.allocator.close()
    return seen


def storage(rank, world, group):
    """The pool under storage backends' allocator types: served under
    "file" and "mooncake", refused with a sentence naming any other."""
    seen = {}
    for backend in ("file", "mooncake"):
        host, _ = mla_pool("layer_first", allocator_type=backend)
        seen[backend] = type(host.allocator).__name__
        host.allocator.close()
        del host
    for backend in ("hf3fs", "nixl"):
        try:
            mla_pool("layer_first", allocator_type=backend)
            seen[backend] = "built"
        except RuntimeError as e:
            seen[backend] = str(e)
    return seen


def desync(rank, world, group):
    """Rank 1 refuses its settings before any segment call (rank 0 waits,
    times out, and gives up); then both build the same pool again: the
    names agree, so the second attempt pairs."""
    import sharedseg.sglang as adapter
    seen = {}
    try:
        if rank == 1:
            adapter.install(pages="base", bogus=1)
        else:
            adapter.install(pages="base", timeout=3)
        mla_pool("layer_first")
        seen["first"] = "built"
    except Exception as e:
        seen["first"] = f"{type(e).__name__}: {e}"
    group.barrier()
    adapter.install(pages="base", timeout=30)
    host, _ = mla_pool("layer_first")
    seen["second"] = type(host.allocator).__name__
    host.allocator.close()
    return seen


def guard(rank, world, group):
    """SGLang's memory guard as a server meets it: no budget scope of our
    own, SGLang's launch width published as a one-host launch publishes
    it, the host's available memory fixed (AVAILABLE). A replicated pool (MLA) past a rank's share of the host but within
    the group's is refused with SGLang's own allocator and served with
    ours (populate lazy: nothing touched); a pool of a rank's own (MHA)
    that large is refused with either."""
    import sharedseg.sglang as adapter
    from sglang.srt.mem_cache.pool_host import base
    from sglang.srt.runtime_context import get_parallel
    get_parallel().override_permanently(launch_world_size=world, nnodes=1)
    # The host's available memory as SGLang reads it, fixed: copies of
    # this test and other work change the real one between the ranks'
    # looks. SGLang's own guard (the 10 GiB reserve, ranks per host) runs.
    base.available_host_memory_bytes = lambda **kwargs: AVAILABLE
    adapter.uninstall()
    allowance, per_host = base.host_memory_budget_bytes(), base.ranks_per_host()
    seen = dict(allowance=allowance, ranks_per_host=per_host)
    want = allowance * 3 // 2  # past a rank's share, within two ranks'
    mla_ratio = want / (TOKENS * LAYERS * 576 * 2)
    mha_ratio = want / (TOKENS * LAYERS * 2 * HEADS * DIM * 2)

    def refusal(build):
        try:
            build().allocator
            return None
        except ValueError as e:
            return str(e)
    seen["own_mla"] = refusal(lambda: mla_pool("layer_first", mla_ratio, scoped=False)[0])
    adapter.install(pages="base", populate="lazy", timeout=60)
    try:
        host, _ = mla_pool("layer_first", mla_ratio, scoped=False)
        seen["ours_mla"] = dict(allocator=type(host.allocator).__name__,
                                pool_bytes=host.size * host.size_per_token,
                                segments=segments_named("sglang-MLATokenToKVPoolHost",
                                                        size="size",
                                                        resident="resident_bytes"))
        dist.barrier()  # every rank has listed the segment before it goes
        host.allocator.close()
        del host
        seen["ours_mha"] = refusal(lambda: mha_pool(rank, mha_ratio, scoped=False))
    finally:
        adapter.uninstall()
    return seen


def rank_main(rank, scenarios, world, port):
    from sglang.srt.plugins import load_plugins
    from sglang.srt.runtime_context import get_parallel
    load_plugins()  # what run_scheduler_process does first
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    group = coordinator(rank, world)
    get_parallel().override_permanently(attn_tp_group=group)
    import sharedseg.sglang as adapter
    seen = dict(installed=adapter.installed(), switch=os.environ.get(adapter.SWITCH))
    for name in scenarios.split(","):
        if name.startswith("mla-"):
            seen[name] = mla(rank, world, group, name[4:])
        else:
            seen[name] = dict(mha=mha, storage=storage, desync=desync,
                              guard=guard)[name](rank, world, group)
    return seen


if __name__ == "__main__":
    engine_ranks.main(rank_main)
