# SPDX-License-Identifier: Apache-2.0
"""Ctrl-C while a rank waits: in complete (the C library polls the
extension's interrupt check about every 50 ms) and in a Store exchange.
KeyboardInterrupt arrives within ~0.2 s, the segment is gone (no mapping,
no memfd left in the process), and a Store tells the other ranks."""
import signal
import subprocess
import sys
import time

import pytest

from conftest import HELPERS, TESTS, env_with_package, free_port

# A shell that starts the tests in the background leaves SIGINT ignored,
# and Python then keeps it so: the waiters take it back.
WAITER = '''
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import sharedseg
from tcp_exchange import TcpExchange

rank, port = int(sys.argv[1]), int(sys.argv[2])
exchange = TcpExchange(rank, 2, port)
calls = [0]

def gather(mine):
    out = exchange(mine)
    calls[0] += 1
    if calls[0] == 2:  # the blobs: complete is next
        print("waiting", flush=True)
    return out

try:
    sharedseg.create_shared_segment("py-ctrlc", {"x": (2, (256,), "float32")}, world_size=2,
                                    rank_id=rank, exchange=gather, pages="base", timeout=60)
    print("completed", flush=True)
except KeyboardInterrupt:
    at = time.monotonic()
    maps = open("/proc/self/maps").read()
    fds = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
           if os.path.exists(f"/proc/self/fd/{fd}")]
    print(f"interrupted {at} mapped={'sseg:py-ctrlc' in maps} "
          f"fd={any('sseg:py-ctrlc' in f for f in fds)}", flush=True)
'''


@pytest.mark.parametrize("interrupted", [0, 1], ids=["owner", "peer"])
def test_ctrl_c_in_complete_raises_keyboard_interrupt_at_once(interrupted):
    port = free_port()
    env = env_with_package()
    late = 1 - interrupted
    # The other rank sleeps 30 s between the blobs and complete.
    other = [sys.executable, f"{HELPERS}/tcp_rank.py", "--rank", str(late), "--world", "2",
             "--port", str(port), "--name", "py-ctrlc", "--delay-complete", "30"]
    waiter = [sys.executable, "-c", WAITER, str(interrupted), str(port)]
    procs = {}
    try:
        for rank in (0, 1):  # rank 0 is the exchange's hub: first
            argv = waiter if rank == interrupted else other
            procs[rank] = subprocess.Popen(argv, env=env, cwd=TESTS, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True)
            time.sleep(0.2)
        proc = procs[interrupted]
        assert proc.stdout.readline().strip() == "waiting"
        time.sleep(0.5)  # inside sseg_complete by now
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    word, at, mapped, fd = out.split()[:4]
    assert word == "interrupted", out
    took = float(at) - sent
    print(f"KeyboardInterrupt {took * 1000:.0f} ms after SIGINT")
    assert took < 0.2, f"KeyboardInterrupt {took:.3f} s after SIGINT"
    assert (mapped, fd) == ("mapped=False", "fd=False"), out


STORE_WAITER = '''
import dataclasses, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import torch.distributed as dist
import sharedseg

@dataclasses.dataclass
class Group:  # vLLM's StatelessProcessGroup: rank, world_size, store
    rank: int
    world_size: int
    store: object

def say_when_waiting():  # rank 0 counted itself in setup: it waits for rank 1 now
    while not store.add("sharedseg/py-ctrlc-store/1/setup/count", 0):
        time.sleep(0.01)
    print("waiting", flush=True)

store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 2, True, wait_for_workers=False)
threading.Thread(target=say_when_waiting, daemon=True).start()
try:
    sharedseg.create_shared_segment("py-ctrlc-store", {"x": (2, (16,), "float32")},
                                    comm_group=Group(0, 2, store), pages="base", timeout=60)
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), flush=True)
print("gave-up", store.add("sharedseg/py-ctrlc-store/1/gave-up", 0), flush=True)
why = sharedseg._store_link._get(store, "sharedseg/py-ctrlc-store/1/why/0", 2048, [])
print("why", why.decode(), flush=True)
'''


def test_ctrl_c_in_a_store_exchange_tells_the_other_ranks():
    proc = subprocess.Popen([sys.executable, "-c", STORE_WAITER, str(free_port())],
                            env=env_with_package(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # however long importing torch takes
        assert line == "waiting\n", line + ("" if line else proc.stderr.read())
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    assert "interrupted" in lines, out + err
    took = float(lines["interrupted"]) - sent
    print(f"KeyboardInterrupt {took * 1000:.0f} ms after SIGINT")
    assert took < 0.2
    assert lines["gave-up"] == "1"
    assert lines["why"].startswith("rank 0 stopped: KeyboardInterrupt"), lines["why"]


def test_the_interrupt_check_stops_complete_with_the_watchs_exception():
    """complete(blobs, watch): an exception from watch stops the wait (how a
    Store's "given up" reaches a rank waiting in complete)."""
    from sharedseg import _native

    class Stop(Exception):
        pass
    calls = []

    def watch():
        calls.append(time.monotonic())
        if len(calls) >= 3:
            raise Stop("given up elsewhere")
    seg0, blob0, *_ = _native.create("py-watch", 2, 0, 0, size=1 << 16, pages=1)
    seg1, blob1, *_ = _native.create("py-watch", 2, 1, 0, size=1 << 16, pages=1)
    # Only the owner completes: it waits for rank 1, which never comes.
    t0 = time.monotonic()
    with pytest.raises(Stop, match="given up elsewhere"):
        seg0.complete(blob0 + blob1, watch)
    assert time.monotonic() - t0 < 1.0 and len(calls) == 3
    # Left for close(), which releases it at once.
    assert seg0.close() is True and seg1.close() is True


def test_a_rank_that_leaves_stops_the_owner_waiting_in_complete(monkeypatch):
    """Over a Store, a rank that leaves the call (here its complete raises)
    says so; the owner, waiting inside sseg_complete for that rank's
    hand-over, stops within a look (0.25 s) instead of at its timeout."""
    import dataclasses
    import threading

    import torch.distributed as dist

    from sharedseg import SharedSegmentError, create_shared_segment
    from sharedseg import _native

    @dataclasses.dataclass
    class Group:  # vLLM's StatelessProcessGroup: rank, world_size, store
        rank: int
        world_size: int
        store: object

    class Leaving:
        def __init__(self, native):
            self.native = native

        def complete(self, blobs, watch=None):
            raise RuntimeError("rank 1 leaves")

        def close(self):
            return self.native.close()

    original = _native.create

    def create(name, world_size, rank, owner, **kwargs):
        native, *rest = original(name, world_size, rank, owner, **kwargs)
        return (Leaving(native) if rank == 1 else native, *rest)
    monkeypatch.setattr(_native, "create", create)
    store, results = dist.HashStore(), {}

    def rank(r):
        t0 = time.monotonic()
        try:
            create_shared_segment("py-leave", {"x": (2, (16,), "float32")},
                                  comm_group=Group(r, 2, store), pages="base", timeout=30)
        except BaseException as e:
            results[r] = (e, time.monotonic() - t0)
    threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    (owner_error, owner_s), (leaver_error, _) = results[0], results[1]
    assert isinstance(leaver_error, RuntimeError)
    assert isinstance(owner_error, SharedSegmentError), owner_error
    assert "rank 1 stopped: RuntimeError: rank 1 leaves" in str(owner_error), owner_error
    assert owner_s < 2.0, f"the owner waited {owner_s:.1f} s"
