# SPDX-License-Identifier: Apache-2.0
"""complete() waits without the GIL: while this process's rank 0 waits in
complete for a peer process that is late, another thread keeps running."""
import subprocess
import sys
import threading
import time

from conftest import HELPERS, env_with_package
from tcp_exchange import TcpExchange

import sharedseg

LATE_S = 1.0


def test_another_thread_runs_while_a_rank_waits_in_complete():
    exchange = TcpExchange(0, 2, timeout=30)
    peer = subprocess.Popen(
        [sys.executable, f"{HELPERS}/tcp_rank.py", "--rank", "1", "--world", "2", "--port",
         str(exchange.port), "--name", "py-gil", "--delay-complete", str(LATE_S)],
        env=env_with_package(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    marks, ticks, stop = {}, [], threading.Event()

    def gather(mine):
        calls = marks.setdefault("calls", 0) + 1
        marks["calls"] = calls
        if calls == 3:
            marks["complete_done"] = time.monotonic()  # the complete-status round
        out = exchange(mine)
        if calls == 2:
            marks["in_complete"] = time.monotonic()  # blobs gathered: complete is next
        return out

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.005)
    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        blocks = {"x": dict(count=2, shape=(256,), dtype="float32"),
                  "h": dict(count=2, shape=(8, 16), dtype="bfloat16")}
        seg = sharedseg.create_shared_segment("py-gil", blocks, world_size=2, rank_id=0,
                                              exchange=gather, pages="base", timeout=20)
    finally:
        stop.set()
        ticker.join()
    xs = seg.arrays("x")
    xs[0][:] = 1
    exchange(b"\0")
    exchange(b"\0")
    del xs
    seg.close()
    out, _ = peer.communicate(timeout=30)
    assert peer.returncode == 0, out
    waited = marks["complete_done"] - marks["in_complete"]
    during = [t for t in ticks if marks["in_complete"] < t < marks["complete_done"]]
    assert waited > 0.7 * LATE_S, f"complete returned after {waited:.2f} s: the peer was not late"
    # ~200 ticks a second when the thread can run; none if complete held the GIL.
    assert len(during) > 20 * waited, f"{len(during)} ticks in {waited:.2f} s"
