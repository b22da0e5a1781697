# SPDX-License-Identifier: Apache-2.0
"""Ranks as threads of one process, over a callable exchange: an
all-gather among the threads (ThreadExchange) and run_ranks, which runs
one call per rank and returns what each gave."""
import threading


class ThreadExchange:
    """An all-gather among threads of this process: one callable per rank."""

    def __init__(self, world_size):
        self.slots = [None] * world_size
        self.filled = threading.Barrier(world_size, timeout=20)
        self.read = threading.Barrier(world_size, timeout=20)

    def rank(self, r):
        def gather(mine):
            self.slots[r] = mine
            self.filled.wait()
            out = list(self.slots)
            self.read.wait()
            return out
        return gather


def run_ranks(world_size, make):
    """make(rank, exchange) in one thread per rank; returns each result or exception."""
    ex, results = ThreadExchange(world_size), [None] * world_size

    def run(r):
        try:
            results[r] = make(r, ex.rank(r))
        except BaseException as e:  # reported by the caller
            results[r] = e
    threads = [threading.Thread(target=run, args=(r,)) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a rank did not finish within 60 s"
    return results
