# SPDX-License-Identifier: Apache-2.0
"""A rogue writer in the group's TCPStore (whoever reaches its port writes
its keys): honest ranks, each a process over a real TCPStore on 127.0.0.1,
fail with a sentence saying what was wrong within about their timeout,
never at the Store's own timeout, and never read a value whole before its
size is known. The rogue is this test process, which also hosts the store,
so what it writes there grows its memory and not the ranks'."""
import datetime
import json
import subprocess
import sys
import time
from urllib.parse import quote

import pytest
import torch.distributed as dist

from sharedseg import _store_link

from conftest import TESTS, env_with_package, free_port

TIMEOUT = 2.0          # the honest ranks' timeout=
STORE_TIMEOUT_S = 40   # the Store's own: what a rank stuck in store.get waits
# The rogue's oversized value: torch 2.x's TCPStore takes at most 8 MiB.
BIG = 6 << 20

RANK = '''
import dataclasses, datetime, json, sys, time
import torch.distributed as dist

from sharedseg import _store_link
import sharedseg

@dataclasses.dataclass
class Group:  # vLLM's StatelessProcessGroup: rank, world_size, store
    rank: int
    world_size: int
    store: object

port, rank, world, name, timeout, store_timeout = sys.argv[1:7]
store = dist.TCPStore("127.0.0.1", int(port), int(world), False,
                      timeout=datetime.timedelta(seconds=float(store_timeout)))
def status(field):  # bytes
    line = next(l for l in open("/proc/self/status") if l.startswith(field + ":"))
    return int(line.split()[1]) << 10

with open("/proc/self/clear_refs", "w") as f:  # the peak RSS is the RSS now
    f.write("5")
rss = status("VmRSS")
store.add("test/ready", 1)  # the ranks start their calls together
store.wait(["test/go"])
got = {"rank": int(rank)}
t0 = time.monotonic()
try:
    with sharedseg.create_shared_segment(name, {"x": (int(world), (16,), "float32")},
                                         comm_group=Group(int(rank), int(world), store),
                                         pages="base", timeout=float(timeout)):
        got["ok"] = True
except Exception as e:
    got.update(error=f"{type(e).__name__}: {e}", errno=getattr(e, "errno", None))
got["took"] = time.monotonic() - t0
got["rss_grew"] = status("VmHWM") - rss
print(json.dumps(got), flush=True)
'''


def meetings(name, call=1):
    """Where the call-th call for name meets, as the rogue sees it: under
    the name ("sharedseg/<name>/<call>"), and "sharedseg/<call>" where calls
    pair by their order, so that the test also runs against that layout."""
    return [f"sharedseg/{quote(name, safe='')}/{call}", f"sharedseg/{call}"]


class Store:
    """The group's TCPStore, hosted here; the rogue's client to it."""

    def __init__(self):
        self.port = free_port()
        self.store = dist.TCPStore("127.0.0.1", self.port, 1, True, wait_for_workers=False,
                                   timeout=datetime.timedelta(seconds=STORE_TIMEOUT_S))

    def start(self, ranks, world, name, timeout=TIMEOUT):
        argv = [sys.executable, "-c", RANK, str(self.port), "", str(world), name, str(timeout),
                str(STORE_TIMEOUT_S)]
        procs = [subprocess.Popen(argv[:4] + [str(r)] + argv[5:], env=env_with_package(),
                                  cwd=TESTS, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for r in ranks]
        self.poll(lambda: self.store.add("test/ready", 0) >= len(ranks), "the ranks to start")
        self.store.set("test/go", "1")
        return procs

    def poll(self, done, what):
        deadline = time.monotonic() + 120  # however long importing torch takes
        while not done():
            assert time.monotonic() < deadline, f"waited 120 s for {what}"
            time.sleep(0.01)

    def wait_counted(self, name, label, count):
        """Polls until count ranks counted themselves in label's exchange."""
        self.poll(lambda: max(self.store.add(f"{m}/{label}/count", 0)
                              for m in meetings(name)) >= count, f"the ranks to reach {label}")


def results(procs):
    """What each honest rank said; one stuck past the Store's timeout fails."""
    seen = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=STORE_TIMEOUT_S + 60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        assert out.strip(), f"a rank said nothing (exit {p.returncode}):\n{err[-3000:]}"
        seen.append(json.loads(out.strip().splitlines()[-1]))
    return seen


def assert_failed_soon(seen, *sentences, timeout=TIMEOUT, within=None):
    for got in seen:
        print(f"rank {got['rank']}: {got['took']:.2f} s: {got.get('error')}")
        assert "error" in got, f"rank {got['rank']} succeeded: {got}"
        assert got["took"] < (within or timeout * 3), \
            f"rank {got['rank']} took {got['took']:.1f} s: {got}"
        for sentence in sentences:
            assert sentence in got["error"], got["error"]


@pytest.fixture
def store():
    return Store()


def test_a_count_bumped_without_a_value_fails_at_the_timeout(store):
    name = "py-rogue-count"
    for m in meetings(name):  # "rank 2 arrived", and it never writes its value
        store.store.add(f"{m}/setup/count", 1)
    seen = results(store.start([0, 1], 3, name))
    assert_failed_soon(seen, "rank 2 wrote no value", "within 2 s",
                       "count says every rank arrived")


def test_a_call_marked_given_up_without_a_reason_stops_the_ranks_at_once(store):
    name = "py-rogue-why"
    procs = store.start([0, 1], 3, name, timeout=30)
    store.wait_counted(name, "setup", 2)
    for m in meetings(name):
        store.store.add(f"{m}/gave-up", 1)
    assert_failed_soon(results(procs), "marked given up with no reason", timeout=2)


def test_a_value_deleted_once_the_count_is_full_fails_at_the_timeout(store):
    name = "py-rogue-delete"
    procs = store.start([0, 1], 3, name)
    store.wait_counted(name, "setup", 2)
    for m in meetings(name):  # rank 0's value goes, then "rank 2 arrived"
        for key in (f"{m}/setup/0", f"{m}/setup/0/len"):
            store.store.delete_key(key)
        store.store.add(f"{m}/setup/count", 1)
    seen = results(procs)
    assert_failed_soon(seen, "wrote no value", "within 2 s")  # or the rank that said so first


def test_many_future_calls_marked_given_up_cost_at_most_the_timeout(store):
    # Passing over a marked call takes two store round trips, marking one
    # takes one: a timeout of an eighth of the marking time does not let
    # the ranks pass over them all, however fast the machine.
    name = "py-rogue-marked"
    t0 = time.monotonic()
    for m, marked in zip(meetings(name), (30000, 1000)):
        stem = m.rsplit("/", 1)[0]
        for call in range(1, marked + 1):
            store.store.add(f"{stem}/{call}/gave-up", 1)
    timeout = min(0.25, (time.monotonic() - t0) / 8)
    seen = results(store.start([0, 1, 2], 3, name, timeout=timeout))
    assert_failed_soon(seen, "calls in a row were marked given up", within=3)


def test_an_oversized_value_is_never_read_whole(store):
    name = "py-rogue-big"
    big = b"9" * BIG
    for m in meetings(name):  # rank 2's value, and its length
        store.store.set(f"{m}/setup/2", big)
        store.store.set(f"{m}/setup/2/len", big)
        store.store.add(f"{m}/setup/count", 1)
    del big
    seen = results(store.start([0, 1], 3, name))
    for got in seen:
        print(f"rank {got['rank']}: peak RSS grew {got['rss_grew'] / 2**20:.1f} MiB")
        assert got["rss_grew"] < BIG, got
    assert_failed_soon(seen, "reading rank 2's setup value (sharedseg/py-rogue-big/1/setup/2/")


def test_a_value_is_read_no_further_than_its_bound():
    store, keys = dist.HashStore(), []
    store.add("v/len", 1 << 40)  # a length no rank writes: not one chunk is read
    with pytest.raises(_store_link._Garbled, match="v/len says 1099511627776 bytes, where at "
                                                 "most 4672 are written"):
        _store_link._get(store, "v", 4096, keys)
    assert keys == ["v/len"]
    _store_link._put(store, "w", bytes(64 << 10), keys)  # 64 KiB of zeros: 0.1 KiB of zlib
    with pytest.raises(_store_link._Garbled, match="w holds no zlib stream of at most 4096 bytes"):
        _store_link._get(store, "w", 4096, keys)
    _store_link._put(store, "x", b"x" * 4096, keys)
    assert _store_link._get(store, "x", 4096, keys) == b"x" * 4096
    with pytest.raises(_store_link._Garbled, match="x/0 held a value before this rank wrote it"):
        _store_link._put(store, "x", b"y" * 4096, keys)
