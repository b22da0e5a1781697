# SPDX-License-Identifier: Apache-2.0
"""Two ranks of a gloo group whose TCPStore rank 0 hosts, and rank 0 leaves
the moment its create_shared_segment call is over (os._exit: the store
goes with it). Rank 1 must still get the call's outcome: the agreed error
when the ranks declared different sizes ("error"), its segment when they
agreed ("success"). Each run forks the two ranks from this process (torch
is imported once); `python store_host_exit.py SCENARIO RUNS` prints rank
1's outcome of each run, one JSON line a run."""
import datetime
import json
import os
import sys
import time

import torch.distributed as dist

from sharedseg import _links, create_shared_segment

WAIT = datetime.timedelta(seconds=60)


def arrive_last():
    """Rank 0 joins the last round once rank 1 waits in it: it then reads
    the round at once and leaves while rank 1 is between two looks (the
    owner, populating, is often the last to arrive)."""
    original = _links.gather

    def gather(link, label, mine, wait_s, size):
        while label == "complete" and link.store.add(f"{link.prefix}/complete/count", 0) < 1:
            time.sleep(0.001)
        return original(link, label, mine, wait_s, size)
    _links.gather = gather


def join(rank, store, size):
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=WAIT)
    return create_shared_segment("py-store-exit", size=size, comm_group=dist.group.WORLD,
                                 pages="base", timeout=30)


def rank0(port_out):
    arrive_last()
    store = dist.TCPStore("127.0.0.1", 0, 2, True, wait_for_workers=False, timeout=WAIT)
    os.write(port_out, f"{store.port}\n".encode())
    try:
        join(0, store, 4096)
    finally:
        os._exit(0)  # at once, the store with it, whatever rank 1 still reads


def rank1(scenario, port_in, result_out):
    try:
        port = int(os.read(port_in, 64))
        store = dist.TCPStore("127.0.0.1", port, 2, False, timeout=WAIT)
        with join(1, store, 8192 if scenario == "error" else 4096):
            got = dict(ok=True)
    except Exception as e:
        got = dict(ok=False, error=f"{type(e).__name__}: {e}")
    os.write(result_out, json.dumps(got).encode())
    os._exit(0)


def run(scenario):
    port_in, port_out = os.pipe()
    result_in, result_out = os.pipe()
    first = os.fork()
    if first == 0:
        rank0(port_out)
    second = os.fork()
    if second == 0:
        rank1(scenario, port_in, result_out)
    for fd in (port_in, port_out, result_out):
        os.close(fd)
    with os.fdopen(result_in, "rb") as f:
        got = f.read()
    os.waitpid(first, 0)
    os.waitpid(second, 0)
    return json.loads(got or b'{"ok": false, "error": "rank 1 wrote nothing"}')


if __name__ == "__main__":
    for _ in range(int(sys.argv[2])):
        print(json.dumps(run(sys.argv[1])), flush=True)
