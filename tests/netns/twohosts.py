#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A real two-host group: two network namespaces joined by a veth pair are
two hosts for sharedseg (abstract sockets and the host identity's network
namespace differ), torch.distributed gloo runs over TCP between them, two
ranks on each. As root; exits 77 (skipped) only where a network namespace
cannot be created.

  1. create_shared_segment with the default owner choice: each host gets its
     own owner (its lowest rank), every rank completes, bytes written on one
     host are seen by the other rank of that host and never on the other host,
     and each rank names its host's ranks as those that map its copy
     (SharedSegment.sharing_ranks).
  2. create_shared_segment with owner_rank=0 on every rank: the owner is on
     one host only, so each host's ranks get their host's owner instead.
  3. The misconfiguration underneath, through the C library: ranks 2 and 3
     name rank 0, on the other host, as their owner (what a C caller can
     pass): sseg_complete fails on every rank with the verification's
     message.

Run by `make test-netns` (after `make all python`: the C library of
$SSEG_BUILD_DIR, default build/, and the package built in place):
    python3 tests/netns/twohosts.py [--json FILE]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORLD = 4
MISCONFIG = "rank 2 names rank 0 as its owner, but they run on different hosts"


# ---- the ranks (run inside a namespace) ----

def c_library():
    """The C library of the build (SSEG_BUILD_DIR, else build/) and the first
    release's struct sseg_opts, which it accepts as it is (opts.sz)."""
    import ctypes

    build = os.environ.get("SSEG_BUILD_DIR") or os.path.join(ROOT, "build")
    lib = ctypes.CDLL(os.path.join(build, "libsharedseg.so.0"))

    class Opts(ctypes.Structure):
        _fields_ = [("sz", ctypes.c_size_t), ("name", ctypes.c_char_p),
                    ("size", ctypes.c_uint64), ("world_size", ctypes.c_int),
                    ("rank", ctypes.c_int), ("owner_rank", ctypes.c_int),
                    ("backend", ctypes.c_int), ("pages", ctypes.c_int), ("numa", ctypes.c_int),
                    ("numa_node", ctypes.c_int), ("populate", ctypes.c_int),
                    ("populate_threads", ctypes.c_int), ("flags", ctypes.c_uint32),
                    ("timeout_ms", ctypes.c_int), ("layout", ctypes.c_void_p)]

    lib.sseg_last_error.restype = ctypes.c_char_p
    lib.sseg_create.argtypes = [ctypes.POINTER(Opts), ctypes.POINTER(ctypes.c_void_p),
                                ctypes.c_char_p]
    lib.sseg_complete.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.sseg_destroy.argtypes = [ctypes.c_void_p]
    return ctypes, lib, Opts


def misconfigured(rank, group):
    """What a C caller can pass and the Python layer never does: rank 0, on
    the other host, as every rank's owner. Verification must refuse it on
    every rank, before anything is mapped."""
    import torch
    import torch.distributed as dist

    ctypes, lib, Opts = c_library()
    blob_size = 4096
    opts = Opts(sz=ctypes.sizeof(Opts), name=b"netns-misconfig", size=1 << 20,
                world_size=WORLD, rank=rank, owner_rank=0, pages=1, timeout_ms=20000)
    seg, blob = ctypes.c_void_p(), ctypes.create_string_buffer(blob_size)
    if lib.sseg_create(ctypes.byref(opts), ctypes.byref(seg), blob):
        return dict(raised=True, message="create: " + lib.sseg_last_error().decode())
    mine = torch.frombuffer(bytearray(blob.raw), dtype=torch.uint8)
    got = [torch.empty_like(mine) for _ in range(WORLD)]
    dist.all_gather(got, mine, group=group)
    rc = lib.sseg_complete(seg, b"".join(bytes(t.tolist()) for t in got))
    message = lib.sseg_last_error().decode() if rc else ""
    lib.sseg_destroy(seg)
    return dict(raised=rc != 0, message=message)


def rank_main(args):
    import datetime

    import torch
    import torch.distributed as dist

    sys.path.insert(0, os.path.join(ROOT, "python"))
    from sharedseg import create_shared_segment

    rank = args.rank
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=60))
    group = dist.new_group(list(range(WORLD)), backend="gloo")
    blocks = {"x": dict(count=WORLD, shape=(1024,), dtype=torch.float32)}
    out = {"netns": os.stat("/proc/self/ns/net").st_ino}

    def shared(label, **kw):
        seg = create_shared_segment(f"netns-{label}", blocks, world_size=WORLD, rank_id=rank,
                                    comm_group=group, pages="base", timeout=20.0, **kw)
        xs = seg.tensors("x")
        xs[rank].fill_(rank + 10)
        dist.barrier(group)
        seen = [float(xs[r][1023]) for r in range(WORLD)]
        dist.barrier(group)
        facts = dict(owner=seg.owner_rank, is_owner=seg.is_owner, seen=seen,
                     sharing=seg.sharing_ranks)
        del xs
        seg.close()
        return facts

    out["default"] = shared("default")
    out["owner0"] = shared("owner0", owner_rank=0)
    out["misconfig"] = misconfigured(rank, group)
    dist.barrier(group)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()


# ---- the hosts (the test itself) ----

def run(cmd, check=True):
    return subprocess.run(cmd, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


class Hosts:
    """Two namespaces and a veth pair, removed again whatever happens."""

    def __init__(self):
        tag = os.getpid() % 100000
        self.ns = [f"sseg-a-{tag}", f"sseg-b-{tag}"]
        self.dev = [f"sseg{tag}a", f"sseg{tag}b"]
        net = 16 + tag % 200
        self.addr = [f"10.213.{net}.1", f"10.213.{net}.2"]

    def __enter__(self):
        try:
            for ns in self.ns:
                run(["ip", "netns", "add", ns])
            run(["ip", "link", "add", self.dev[0], "netns", self.ns[0], "type", "veth",
                 "peer", "name", self.dev[1], "netns", self.ns[1]])
            for ns, dev, addr in zip(self.ns, self.dev, self.addr):
                self.exec(ns, ["ip", "link", "set", "lo", "up"])
                self.exec(ns, ["ip", "addr", "add", f"{addr}/24", "dev", dev])
                self.exec(ns, ["ip", "link", "set", dev, "up"])
        except subprocess.CalledProcessError as e:
            self.__exit__(None, None, None)
            raise OSError(f"{' '.join(e.cmd)}: {e.stderr.strip()}") from e
        return self

    def exec(self, ns, cmd):
        return run(["ip", "netns", "exec", ns] + cmd)

    def __exit__(self, *exc):
        for ns in self.ns:
            run(["ip", "netns", "del", ns], check=False)


def free_port():
    import random
    return random.randint(20000, 60000)


def start_ranks(hosts, out, python):
    port = free_port()
    procs = []
    for rank in range(WORLD):
        host = rank // 2
        env = dict(os.environ, GLOO_SOCKET_IFNAME=hosts.dev[host], PYTHONUNBUFFERED="1")
        cmd = ["ip", "netns", "exec", hosts.ns[host], python, os.path.abspath(__file__),
               "--rank", str(rank), "--master", hosts.addr[0], "--port", str(port),
               "--out", out]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    return procs


def wait_ranks(procs, timeout):
    deadline = time.monotonic() + timeout
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=max(1, deadline - time.monotonic()))[0])
        except subprocess.TimeoutExpired:
            p.kill()
            logs.append(p.communicate()[0] + "\n(killed: past the deadline)")
    return logs


def judge(results):
    """Problems found, as sentences."""
    problems = []
    nets = {r: res["netns"] for r, res in enumerate(results)}
    if nets[0] != nets[1] or nets[2] != nets[3] or nets[0] == nets[2]:
        problems.append(f"ranks did not run on two hosts: network namespaces {nets}")
    for label in ("default", "owner0"):
        for r, res in enumerate(results):
            d = res[label]
            host_owner = 0 if r < 2 else 2
            mates = (0, 1) if r < 2 else (2, 3)
            want = [float(s + 10) if s in mates else 0.0 for s in range(WORLD)]
            if d["owner"] != host_owner or d["is_owner"] != (r == host_owner):
                problems.append(f"{label}: rank {r} has owner {d['owner']}, expected {host_owner}")
            if d["sharing"] != list(mates):
                problems.append(f"{label}: rank {r} says ranks {d['sharing']} map its copy, "
                                f"expected {list(mates)}")
            if d["seen"] != want:
                problems.append(f"{label}: rank {r} saw {d['seen']}, expected {want} (its own "
                                f"host's writes only)")
    for r, res in enumerate(results):
        m = res["misconfig"]
        if not m["raised"] or MISCONFIG not in m["message"]:
            problems.append(f"misconfiguration: rank {r} {m}")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int)
    ap.add_argument("--master")
    ap.add_argument("--port", type=int)
    ap.add_argument("--out")
    ap.add_argument("--json", help="append the figures here (default: $SSEG_RELIABILITY_OUT)")
    args = ap.parse_args()
    if args.rank is not None:
        return rank_main(args)
    if os.geteuid() != 0:
        print("twohosts: network namespaces need root: skipped")
        return 77
    if not shutil.which("ip"):
        print("twohosts: the ip command (Debian package iproute2) is missing")
        return 1
    out = tempfile.mkdtemp(prefix="sseg-netns-")
    t0 = time.monotonic()
    try:
        with Hosts() as hosts:
            logs = wait_ranks(start_ranks(hosts, out, sys.executable), timeout=240)
            results = []
            for rank in range(WORLD):
                path = os.path.join(out, f"rank{rank}.json")
                if not os.path.exists(path):
                    print(f"rank {rank} wrote no result:\n{logs[rank]}")
                    return 1
                with open(path) as f:
                    results.append(json.load(f))
    except OSError as e:
        print(f"twohosts: cannot create two network namespaces here ({e}): skipped")
        return 77
    finally:
        shutil.rmtree(out, ignore_errors=True)
    problems = judge(results)
    for p in problems:
        print("FAILED:", p)
    took = time.monotonic() - t0
    record = args.json or os.environ.get("SSEG_RELIABILITY_OUT")
    if record:
        with open(record, "a") as f:
            f.write(json.dumps(dict(schema=1, test="twohosts", ranks=WORLD, hosts=2, ok=not problems,
                                    seconds=round(took, 1), problems=problems,
                                    misconfig=results[0]["misconfig"].get("message", "")))
                    + "\n")
    if not problems:
        print(f"twohosts: 2 hosts x 2 ranks over gloo/TCP: one owner per host, no bytes "
              f"crossed hosts, the misconfiguration failed on every rank naming it "
              f"({took:.1f} s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
