# SPDX-License-Identifier: Apache-2.0
"""One SGLang attention-TP group with HiCache's Mooncake tier, for
test_sglang_mooncake.py and bench/sglang_mooncake.py: WORLD ranks spawned as
SGLang's launcher spawns its schedulers (the documented switch
SHAREDSEG_SGLANG as the environment has it), each with SGLang's own MLA host
pool (on CPU) and SGLang's own HiCacheController (its prefetch, backup and
sync threads, its MIN all-reduces over gloo), whose storage backend SGLang's
factory builds from --hicache-storage-backend mooncake's name.

    python sglang_mooncake_group.py WORLD PORT CONFIG_JSON

CONFIG_JSON: {"mooncake": the backend's extra config (master_server_address,
metadata_server, protocol, global_segment_size, local_hostname), "ratio":
the host pool's size over the device's}. Reads commands on stdin, one a
line; answers each with one JSON line, {"ranks": [each rank's answer]}:

    store SEED PAGES      the prefix of SEED (PAGES pages; page i's bytes
                          from SEED and i) written into host pages (rank 0
                          writes, the pool being one copy or each rank
                          writing its own) and backed up by SGLang's backup
                          thread: {"stored": tokens}
    prefetch SEED PAGES   SGLang's prefetch of that prefix, the scheduler's
                          part played as SGLang's tree plays it (allocate
                          the hit's host pages, hand the operation to the
                          IO thread, read the acks, rank-agreed, to the
                          last): {"hit", "completed" (tokens), "same" (each
                          completed page's bytes right), "fetched", "left"
                          (pages this rank asked Mooncake for, left to
                          others), "seconds"}
    fault RANK DELAY_MS FAIL_FROM
                          from now on, rank RANK's Mooncake gets wait
                          DELAY_MS first, and fail from the FAIL_FROM-th
                          page of each (-1: none): {"fault": RANK == rank}
    quit

A rank that fails answers {"crash": traceback} and the group ends.

Group (below) starts one and talks to it: the tests and the benchmark
(bench/sglang_mooncake.py) drive groups through it."""
import json
import multiprocessing
import os
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def page_of(seed, i, numel):
    import torch
    g = torch.Generator().manual_seed(seed * 100003 + i)
    return torch.randn(numel, generator=g).to(torch.bfloat16)


def page_kind(address):
    """The pages mapped at address in this process, on the kernel's word
    (/proc/self/smaps): hugetlb-2M, thp (some of them huge), or base."""
    with open("/proc/self/smaps") as f:
        lines = f.read().splitlines()
    facts, inside = {}, False
    for line in lines:
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            if inside:
                break
            inside = lo <= address < hi
        elif inside and line.split()[1].isdigit():  # not VmFlags
            facts[head.rstrip(":")] = int(line.split()[1])
    if facts.get("KernelPageSize") == 2048:
        return "hugetlb-2M"
    huge = sum(facts.get(k, 0) for k in ("AnonHugePages", "ShmemPmdMapped", "FilePmdMapped"))
    return "thp" if huge else "base"


def tokens_of(seed, pages, page):
    # distinct tokens a prefix, so that the page hashes differ by seed
    return [seed * 1000003 + t for t in range(pages * page)]


class Rank:
    def __init__(self, rank, world, port, config):
        import torch.distributed as dist
        from sglang.srt.plugins import load_plugins
        from sglang.srt.runtime_context import get_parallel
        import sglang_ranks
        load_plugins()  # what run_scheduler_process does first
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world)
        self.group = sglang_ranks.coordinator(rank, world)
        # what building the groups writes, for one TP group (no DP, CP, PP)
        get_parallel().override_permanently(
            attn_tp_group=self.group, tp_rank=rank, tp_size=world, attn_tp_rank=rank,
            attn_tp_size=world, attn_dcp_size=1, attn_dcp_rank=0, pp_rank=0, pp_size=1,
            pp_group=None, attn_cp_group=None, attn_cp_rank=0, attn_cp_size=1)
        self.rank, self.world = rank, world
        self.page = sglang_ranks.PAGE
        self.host, _ = sglang_ranks.mla_pool("layer_first", ratio=config.get("ratio", 2.0),
                                             allocator_type="mooncake")
        self.cc = self.controller(config["mooncake"])
        self.backend = self.cc.storage_backend
        self.numel = self.host.get_dummy_flat_data_page().numel()

    def controller(self, extra):
        import torch
        from sglang.srt.managers.cache_controller import HiCacheController
        from sglang.srt.mem_cache.memory_pool import MLATokenToKVPool
        import sglang_ranks

        class Allocator:  # the device allocator's one method the controller asks
            def __init__(self):
                self.pool = MLATokenToKVPool(
                    size=sglang_ranks.TOKENS, page_size=sglang_ranks.PAGE, dtype=torch.bfloat16,
                    kv_lora_rank=512, qk_rope_head_dim=64, layer_num=sglang_ranks.LAYERS,
                    device="cpu", enable_memory_saver=False)

            def get_kvcache(self):
                return self.pool

        cpu = self.group.cpu_group
        return HiCacheController(
            Allocator(), self.host, self.page, cpu, threading.Event(), attn_tp_group=cpu,
            io_backend="direct", storage_backend="mooncake", model_name="tiny",
            storage_backend_extra_config=dict(extra))

    def hashes(self, seed, pages):
        from sglang.srt.mem_cache.utils import get_storage_hash_str
        return get_storage_hash_str(tokens_of(seed, pages, self.page), None,
                                    page_size=self.page)

    def store(self, seed, pages):
        indices = self.host.alloc(pages * self.page)
        if self.rank == 0 or not self.shared():
            for i in range(pages):
                self.host.set_from_flat_data_page(int(indices[i * self.page]),
                                                  page_of(seed, i, self.numel))
        self.group.barrier()
        op_id = self.cc.write_storage(indices, tokens_of(seed, pages, self.page),
                                      hash_value=self.hashes(seed, pages))
        op = self.cc.ack_backup_queue.get(timeout=120)
        assert op.id == op_id, (op.id, op_id)
        stored = op.completed_tokens
        self.group.barrier()  # no rank lets go of pages another still backs up
        self.host.free(indices)
        return dict(stored=stored)

    def shared(self):
        return type(self.host.allocator).__name__ == "SharedSegHostTensorAllocator"

    def prefetch(self, seed, pages):
        import torch
        fetched, left = self.counts()
        rid = f"req-{seed}-{time.monotonic_ns()}"
        t0 = time.perf_counter()
        op = self.cc.prefetch(rid, tokens_of(seed, pages, self.page))
        got = self.cc.prefetch_hit_queue.get(timeout=120)  # its hit query, rank-agreed
        assert got is op
        hit = op.storage_hit_count
        indices = self.cc.alloc_prefetch_host_buffers(op, hit) if hit else None
        if indices is None:
            op.mark_terminate()
            self.cc.prefetch_buffer.put(op)  # the IO thread still acks it
        else:
            op.host_indices = indices
            self.cc.prefetch_buffer.put(op)
        while True:  # the acks, each completed count MIN-reduced over the ranks
            ack = self.cc.ack_prefetch_queue.get(timeout=120)
            if ack.completed_tokens is not None:
                op.completed_tokens = ack.completed_tokens
            if ack.completed_req:
                break
        seconds = time.perf_counter() - t0
        done = op.completed_tokens // self.page
        same = [bool(torch.equal(self.host.get_data_page(int(indices[i * self.page]))
                                 .view(torch.int16),
                                 page_of(seed, i, self.numel).view(torch.int16)))
                for i in range(done)] if indices is not None else []
        self.group.barrier()  # no rank lets go of pages another still reads
        if indices is not None:
            self.host.free(indices)
        now_fetched, now_left = self.counts()
        return dict(hit=hit, completed=op.completed_tokens, same=same,
                    fetched=now_fetched - fetched, left=now_left - left, seconds=seconds,
                    pages=page_kind(self.host.kv_buffer.data_ptr()))

    def fault(self, rank, delay_ms, fail_from):
        if rank != self.rank:
            return dict(fault=False)
        b = getattr(self.backend, "_backend", self.backend)
        own = type(b)._get_batch_zero_copy_impl

        def get(key_strs, buffer_ptrs, buffer_sizes):
            time.sleep(delay_ms / 1000)
            results = own(b, key_strs, buffer_ptrs, buffer_sizes)
            return [-1 if 0 <= fail_from <= j else res for j, res in enumerate(results)]
        b._get_batch_zero_copy_impl = get
        return dict(fault=True)

    def counts(self):
        b = getattr(self.backend, "_backend", self.backend)  # under SGLang's fault wrapper
        fetched = getattr(b, "pages_fetched", None)
        if fetched is None:  # SGLang's own backend: every page it asks for
            return self.asked.get("n", 0), 0
        return fetched, b.pages_left

    asked = {}


def _count_own_gets():
    """SGLang's own MooncakeStore counts nothing: count the pages its
    batch_get_v1 asks for, in this process."""
    from sglang.srt.mem_cache.storage.mooncake_store import mooncake_store as m
    own = m.MooncakeStore.batch_get_v1

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        Rank.asked["n"] = Rank.asked.get("n", 0) + len(keys)
        return own(self, keys, host_indices, extra_info)
    m.MooncakeStore.batch_get_v1 = batch_get_v1


def rank_main(rank, world, port, config, commands, answers):
    try:
        if os.environ.get("SHAREDSEG_SGLANG", "").strip() in ("", "0"):
            _count_own_gets()
        r = Rank(rank, world, port, config)
        answers.put((rank, dict(ready=type(getattr(r.backend, "_backend", r.backend)).__name__,
                                allocator=type(r.host.allocator).__name__)))
        while True:
            cmd = commands.get()
            if cmd[0] == "quit":
                break
            answers.put((rank, getattr(r, cmd[0])(*map(int, cmd[1:]))))
        answers.put((rank, dict(quit=True)))
    except Exception:
        answers.put((rank, dict(crash=traceback.format_exc())))


# ---- the driver's side (no SGLang, no Mooncake in its process) ----

class Group:
    """One group started (under the command prefix within: a network
    namespace's `ip netns exec NS`), driven by lines; ask() fails on a rank
    that crashed."""

    def __init__(self, world, mooncake, env, within=(), ratio=2.0):
        import subprocess
        self.p = subprocess.Popen(
            list(within) + [sys.executable, os.path.abspath(__file__), str(world),
                            str(free_port()),
                            json.dumps(dict(mooncake=mooncake, ratio=ratio))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.ready = self.read()

    def read(self):
        line = self.p.stdout.readline()
        assert line, f"the group ended: {self.p.wait(timeout=120)}"
        return json.loads(line)["ranks"]

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        ranks = self.read()
        for r in ranks:
            assert r is not None and "crash" not in r, r
        return ranks

    def close(self):
        if self.p.poll() is None:
            self.ask("quit")
            self.p.stdin.close()
        assert self.p.wait(timeout=120) == 0
        self.p.stdout.close()


def free_port():
    """A port the kernel has free now, for the group's gloo store (a
    random one may be another connection's: the ephemeral range is in
    20000-60000)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mooncake_config(master, host="127.0.0.1", **more):
    """The backend's extra config (SGLang's keys) for a master
    (helpers/mooncake_master.py) and this host's address."""
    return dict(master_server_address=master.rpc, metadata_server=master.metadata,
                protocol="tcp", global_segment_size=64 << 20, local_hostname=host, **more)


def rx_bytes(hosts, host):
    """Bytes received on a host's end of the link (its /proc/net/dev;
    hosts: tests/netns/twohosts.py's Hosts)."""
    out = hosts.exec(hosts.ns[host], ["cat", "/proc/net/dev"]).stdout
    for line in out.splitlines():
        name, _, fields = line.partition(":")
        if name.strip() == hosts.dev[host]:
            return int(fields.split()[0])
    raise AssertionError(f"no {hosts.dev[host]} in {out}")


def main():
    world, port, config = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
    ctx = multiprocessing.get_context("spawn")
    answers = ctx.Queue()
    queues = [ctx.Queue() for _ in range(world)]
    procs = [ctx.Process(target=rank_main, args=(r, world, port, config, queues[r], answers))
             for r in range(world)]
    for p in procs:
        p.start()

    def gather():
        got = {}
        while len(got) < world:
            rank, answer = answers.get(timeout=600)
            got[rank] = answer
            if "crash" in answer:
                break
        return [got.get(r) for r in range(world)]

    ready = gather()
    print(json.dumps({"ranks": ready}), flush=True)
    if any(a is None or "crash" in a for a in ready):
        for p in procs:
            p.kill()
        return 1
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        for q in queues:
            q.put(cmd)
        got = gather()
        print(json.dumps({"ranks": got}), flush=True)
        if cmd[0] == "quit" or any(a is None or "crash" in a for a in got):
            break
    for p in procs:
        p.join(timeout=60)
        if p.exitcode is None:
            p.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
