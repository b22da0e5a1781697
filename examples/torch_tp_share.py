# SPDX-License-Identifier: Apache-2.0
"""An MLA-shaped KV offload shared by a tensor-parallel group.

MLA models (DeepSeek-V3, Kimi K2, ...) keep the same latent KV cache (576
bf16 values per token per layer) in every rank of a TP group. Offloaded to
host memory the usual way, each rank holds its own copy; with sharedseg the
group maps one. This spawns a 4-rank gloo group, offloads 61 layers of
latent KV into one shared segment (each rank writes the layers it is
responsible for), has every rank read every layer, and prints the host
memory the group used against per-rank copies.

    python3 examples/torch_tp_share.py [--ranks 4] [--layers 61] [--tokens 4096]
"""
import argparse
import datetime
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from sharedseg import create_shared_segment

KV_LORA_RANK, ROPE_DIM = 512, 64  # DeepSeek-V3: 512 latent + 64 rope = 576 per token


def mapping_usage(base, size, world):
    """This process's share (bytes) of the pages in [base, base+size): PSS
    for base and THP pages (a page mapped by n processes counts 1/n in
    each). smaps gives HugeTLB pages no PSS, only Private_Hugetlb (mapped
    here alone: counted whole) and Shared_Hugetlb (mapped by others too:
    counted 1/world, as every rank maps every page here: each reads every
    layer)."""
    pss = private_huge = shared_huge = 0
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                start = int(head.split("-")[0], 16)
                inside = base <= start < base + size
            elif inside and head == "Pss:":
                pss += int(line.split()[1]) * 1024
            elif inside and head == "Private_Hugetlb:":
                private_huge += int(line.split()[1]) * 1024
            elif inside and head == "Shared_Hugetlb:":
                shared_huge += int(line.split()[1]) * 1024
    return pss + private_huge + shared_huge / world


def rank_main(rank, world, port, layers, tokens):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    tp_group = dist.new_group(list(range(world)), backend="gloo")
    kv_shape = (tokens, KV_LORA_RANK + ROPE_DIM)
    seg = create_shared_segment(
        "mla_kv_offload",
        blocks={"kv": dict(count=layers, shape=kv_shape, dtype=torch.bfloat16)},
        world_size=world, rank_id=rank, tp_group=tp_group)
    kv_cpu = seg.tensors("kv")  # one zero-copy CPU tensor per layer

    # Offload: each rank copies the layers it owns (here l % world) from its
    # "device" KV; in MLA every rank holds the same values, so one write suffices.
    for layer in range(rank, layers, world):
        kv_cpu[layer].copy_(torch.full(kv_shape, float(layer % 97), dtype=torch.bfloat16))
    dist.barrier(tp_group)

    # Load: every rank reads every layer back (and so maps every page).
    good = all(float(kv_cpu[layer][-1, -1]) == float(layer % 97) and
               bool(kv_cpu[layer].eq(float(layer % 97)).all()) for layer in range(layers))
    base, size = seg.base_addr(), seg.info["mapped_size"]
    zero_copy = all(base <= t.data_ptr() < base + size for t in kv_cpu)
    dist.barrier(tp_group)  # PSS splits a page among the ranks mapping it by now
    mine = torch.tensor([mapping_usage(base, size, world), int(good), int(zero_copy)],
                        dtype=torch.float64)
    every = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(every, mine, group=tp_group)
    if rank == 0:
        report(seg, every, world, layers, tokens)
    dist.barrier(tp_group)
    del kv_cpu
    seg.close()
    dist.destroy_process_group()


def report(seg, every, world, layers, tokens):
    mib = 1 << 20
    copy = seg.total_size()
    used = sum(float(t[0]) for t in every)
    info = seg.info
    print(f"MLA KV offload: {layers} layers x {tokens} tokens x "
          f"{KV_LORA_RANK + ROPE_DIM} bf16 = {copy / mib:.1f} MiB per copy")
    print(f"{world} ranks mapped one segment: backend {info['backend']}, "
          f"{info['pages']} pages ({info['page_size'] // 1024} KiB), owner rank "
          f"{info['owner_rank']}, every rank read every layer: "
          f"{all(float(t[1]) == 1 for t in every)}, zero copy: "
          f"{all(float(t[2]) == 1 for t in every)}")
    print(f"host memory used by the {world} ranks: {used / mib:.1f} MiB "
          f"(each rank's PSS of the segment; HugeTLB pages: private ones whole, shared "
          f"ones 1/{world} each)")
    print(f"with per-rank copies: {world * copy / mib:.1f} MiB")
    print(f"{world} ranks used {used / copy:.2f} copies of the KV cache "
          f"(saved {(world * copy - used) / mib:.1f} MiB)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--layers", type=int, default=61)
    ap.add_argument("--tokens", type=int, default=4096)
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(rank_main, args=(a.ranks, port, a.layers, a.tokens), nprocs=a.ranks)


if __name__ == "__main__":
    main()
