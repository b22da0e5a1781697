# SPDX-License-Identifier: Apache-2.0
"""populate="background" through the package: create returns before the
pages are resident, every rank can use the segment at once, progress counts
the pages, wait_populated() ends when they are all resident (on the owner:
its work; on a peer: the count), its arguments are checked, and Ctrl-C
interrupts it."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import env_with_package
from tcp_exchange import TcpExchange

import sharedseg

SIZE = 256 << 20


def _rank(rank, exchange, out):
    try:
        with sharedseg.create_shared_segment("py-bg", size=SIZE, world_size=2, rank_id=rank,
                                             exchange=exchange, pages="base",
                                             populate="background", timeout=60) as seg:
            out[rank] = seg
            view = seg.buffer()
            if rank == 0:
                view[SIZE - 1] = 0x5A  # usable before it is resident
            exchange(b"\0")
            out[f"seen{rank}"] = view[SIZE - 1]
            resident, total = seg.populate_progress()
            assert total == SIZE and 0 < resident <= total
            seg.wait_populated(timeout=120)
            out[f"after{rank}"] = seg.populate_progress()
            assert seg.info["settings"]["populate"] == {"value": "background", "source": "argument"}
            exchange(b"\0")  # nobody closes while the other still reads
            del view
    except BaseException as e:  # reported by the test thread
        out[f"error{rank}"] = e


def test_two_ranks_use_it_at_once_and_see_it_resident():
    ex0 = TcpExchange(0, 2, timeout=60)
    ex1 = TcpExchange(1, 2, ex0.port, timeout=60)
    out = {}
    threads = [threading.Thread(target=_rank, args=(r, ex, out)) for r, ex in ((0, ex0), (1, ex1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert "error0" not in out and "error1" not in out, out
    assert out["seen0"] == out["seen1"] == 0x5A
    assert out["after0"] == out["after1"] == (SIZE, SIZE)
    assert out[0].is_owner and not out[1].is_owner


def test_other_modes_return_at_once_and_bad_timeouts_are_refused():
    with sharedseg.create_shared_segment("py-bg-owner", size=8 << 20, pages="base") as seg:
        seg.wait_populated(timeout=0)
        assert seg.populate_progress() == (8 << 20, 8 << 20)
        for bad in (-1, "1", True, float("nan"), 10**9):
            with pytest.raises(ValueError, match="timeout="):
                seg.wait_populated(timeout=bad)
    with pytest.raises(sharedseg.SharedSegmentError, match="closed"):
        seg.wait_populated()
    with pytest.raises(ValueError, match="background"):
        sharedseg.create_shared_segment("py-bg-bad", size=8 << 20, populate="eager")


# 1 GiB with one thread takes the owner about 0.6 s on 4 KiB pages here (the
# bench's one-thread population; 16 copies at once slow it further): SIGINT is sent
# once the main thread sleeps in the wait (futex, in /proc/PID/syscall). A
# wait that ended first says so and fails the test.
WAITER = '''
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
import sharedseg
seg = sharedseg.create_shared_segment("py-bg-ctrlc", size=1 << 30, pages="base",
                                      populate="background", populate_threads=1)
try:
    print("waiting", flush=True)
    seg.wait_populated()
    print("finished before the signal", seg.populate_progress(), flush=True)
except KeyboardInterrupt:
    resident, total = seg.populate_progress()
    seg.buffer()[total - 1] = 1  # still usable
    print("interrupted", resident < total, flush=True)
seg.close()
'''


def _until_asleep_in_futex(pid, bound_s=30):
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/syscall") as f:
            if f.read().split()[0] == "202":  # futex: pthread_cond_timedwait
                return
        time.sleep(0.001)
    raise AssertionError(f"the waiter did not sleep in the wait within {bound_s} s")


def test_ctrl_c_interrupts_the_wait():
    proc = subprocess.Popen([sys.executable, "-c", WAITER], env=env_with_package(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout.readline().strip() == "waiting"
        _until_asleep_in_futex(proc.pid)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert out.split() == ["interrupted", "True"], out


# A wait that lasts: 1 GiB on one thread takes the owner about 0.6 s here.
def _slow_segment(name):
    return sharedseg.create_shared_segment(name, size=1 << 30, pages="base",
                                           populate="background", populate_threads=1)


def _waiter(seg, out):
    def run():
        try:
            seg.wait_populated(timeout=120)
            out["waited"] = True
        except BaseException as e:
            out["error"] = e
    return threading.Thread(target=run)


def test_progress_and_info_beside_a_wait():
    seg, out = _slow_segment("py-bg-beside"), {}
    waiter = _waiter(seg, out)
    waiter.start()
    beside, second = [], []
    while waiter.is_alive():
        inside = seg._native.waiting  # in the C call, without the GIL
        resident, total = seg.populate_progress()
        if inside and resident < total:
            beside.append(seg.info["populate_s"])
            try:  # refused while the other runs (it may just have ended)
                seg.wait_populated(timeout=0)
            except (sharedseg.SharedSegmentError, TimeoutError) as e:
                second.append(str(e))
    waiter.join()
    seg.close()
    assert out == {"waited": True}, out
    assert beside, "no call ran while the wait did"
    assert "wait_populated: another wait_populated is running on this segment (one at a " \
        "time)" in second, second


def test_close_on_another_thread_stops_the_wait():
    name = f"py-bg-close-{os.getpid()}"  # the list is the host's
    seg, out = _slow_segment(name), {}
    waiter = _waiter(seg, out)
    waiter.start()
    while not (seg._native.waiting and seg.populate_progress()[0] < (1 << 30)):
        assert waiter.is_alive(), out
    assert seg.close() is True  # the wait has stopped, the pages are gone
    waiter.join()
    assert isinstance(out.get("error"), sharedseg.SharedSegmentError), out
    assert str(out["error"]) == ("wait_populated: the segment was closed on another thread "
                                 "while it waited")
    assert seg.closed and not seg._native.mapped
    assert [s for s in sharedseg.list_segments() if s["name"] == name] == []


def test_close_in_a_signal_handler_inside_the_wait():
    seg, got, over = _slow_segment("py-bg-handler"), {}, threading.Event()

    def send():
        while not (seg._native.waiting and seg.populate_progress()[0] < (1 << 30)):
            if over.is_set():
                return  # the wait ended first: the test fails on its own
        os.kill(os.getpid(), signal.SIGUSR1)
    previous = signal.signal(signal.SIGUSR1, lambda *_: got.setdefault("closed", seg.close()))
    sender = threading.Thread(target=send)
    sender.start()
    try:
        with pytest.raises(sharedseg.SharedSegmentError, match="^wait_populated: the segment "
                           "was closed by a signal handler on this thread while it waited$"):
            seg.wait_populated(timeout=120)
    finally:
        over.set()
        sender.join()
        signal.signal(signal.SIGUSR1, previous)
    assert got == {"closed": False}  # the wait was this thread's: it released after
    assert seg.closed and not seg._native.mapped


class _Recorder:
    closed = False

    def __init__(self):
        self.ms = []

    def populate_wait(self, ms):
        self.ms.append(ms)


def test_the_timeout_bound_is_the_c_calls():
    with sharedseg.create_shared_segment("py-bg-bound", size=8 << 20, pages="base") as seg:
        seg.wait_populated(timeout=2147483.647)  # the bound itself reaches the C call
        for bad in (2147483.648, 2147484, 2**64, -0.001, float("inf"), float("-inf"),
                    float("nan")):
            with pytest.raises(ValueError, match=r"seconds from 0 to 2147483\.647 \(the C "
                               r"call waits at most 2\*\*31-1 ms\), or None"):
                seg.wait_populated(timeout=bad)
        native, seg._native = seg._native, _Recorder()
        try:
            for t in (2147483.647, 2147483, 0.0005, 0, 0.0, 1.5, None):
                seg.wait_populated(timeout=t)
            assert seg._native.ms == [2147483647, 2147483000, 1, 0, 0, 1500, -1]
        finally:
            seg._native = native


_OWNER = """
import sys, time
from tcp_exchange import TcpExchange
import sharedseg
ex = TcpExchange(0, 2, timeout=60)
print(ex.port, flush=True)
seg = sharedseg.create_shared_segment("py-bg-owner", size=1 << 30, world_size=2, rank_id=0,
                                      exchange=ex, pages="base", populate="background",
                                      populate_threads=1, timeout=60)
print("made", flush=True)
time.sleep(600)
"""


def test_a_peers_wait_ends_when_the_owner_is_killed():
    """The owner stopped (SIGSTOP freezes its work part-way), then killed:
    a peer's unbounded wait raises EOWNERDEAD at once, where it used to
    spin forever; the peer's own writes still make its pages resident."""
    import errno
    owner = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, text=True,
                             env=env_with_package())
    try:
        port = int(owner.stdout.readline())
        with sharedseg.create_shared_segment("py-bg-owner", size=1 << 30, world_size=2,
                                             rank_id=1, exchange=TcpExchange(1, 2, port, 60),
                                             pages="base", populate="background",
                                             timeout=60) as seg:
            assert owner.stdout.readline() == "made\n"
            os.kill(owner.pid, signal.SIGSTOP)
            resident, total = seg.populate_progress()
            assert resident < total, "the owner populated 1 GiB before it was stopped"
            os.kill(owner.pid, signal.SIGKILL)
            owner.wait(30)
            done = {}

            def wait():
                try:
                    seg.wait_populated()
                except sharedseg.SharedSegmentError as e:
                    done["error"] = e
                else:
                    done["returned"] = True
            waited = threading.Thread(target=wait, daemon=True)
            waited.start()
            waited.join(60)
            assert not waited.is_alive(), "wait_populated() did not return after the owner died"
            err = done["error"]
            assert err.errno == errno.EOWNERDEAD
            assert "owner rank 0" in str(err) and "(it exited or was killed)" in str(err)
            view = seg.buffer()
            for off in range(0, total, 4096):
                view[off] = 1
            del view
            seg.wait_populated()  # every page resident now: returns
    finally:
        owner.kill()
        owner.wait()
