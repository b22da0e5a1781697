# SPDX-License-Identifier: Apache-2.0
"""Calls over a Store stay in step: ranks as threads of one process, each
with a StatelessProcessGroup-like group over one HashStore. A rank whose
call went wrong before the exchange (two groups named, a coordinator that
disagrees with its cpu_group) reports it to every rank, and a rank that
missed a call the others gave up on meets them at their next call."""
import errno
import threading

import pytest
import torch.distributed as dist

from sharedseg import SharedSegmentError, SharedSegmentValueError, create_shared_segment

WORLD = 3
X = {"x": (WORLD, (16,), "int32")}


class Group:
    """vLLM's StatelessProcessGroup, as far as the package uses it."""

    def __init__(self, rank, world_size, store):
        self.rank, self.world_size, self.store = rank, world_size, store


class Coordinator:
    """A vLLM/SGLang GroupCoordinator over a cpu_group."""

    def __init__(self, cpu_group, rank_in_group):
        self.cpu_group, self.rank_in_group, self.world_size = cpu_group, rank_in_group, WORLD


def each_rank(call):
    """call(rank) in one thread per rank; every rank's result or exception."""
    results = [None] * WORLD

    def run(r):
        try:
            results[r] = call(r)
        except BaseException as e:  # reported by the caller
            results[r] = e
    threads = [threading.Thread(target=run, args=(r,)) for r in range(WORLD)]
    for t in threads:
        t.start()
    for t in threads:  # joining them all is the barrier between calls
        t.join(60)
        assert not t.is_alive(), "a rank did not finish within 60 s"
    return results


def shares(groups, name):
    """A segment over groups that every rank writes and reads; returns
    what each rank saw (or raised)."""
    done = threading.Barrier(WORLD, timeout=20)

    def call(r):
        with create_shared_segment(name, X, comm_group=groups[r], pages="base",
                                   timeout=10) as seg:
            xs = seg.tensors("x")
            xs[r].fill_(100 + r)
            done.wait()
            seen = [int(x[0]) for x in xs]
            done.wait()
            del xs
            return seen
    return each_rank(call)


@pytest.fixture
def groups():
    store = dist.HashStore()
    return [Group(r, WORLD, store) for r in range(WORLD)]


def assert_shared(results):
    for r, got in enumerate(results):
        assert got == [100, 101, 102], f"rank {r}: {got!r}"


def test_two_groups_named_on_one_rank_are_every_ranks_error_and_the_next_call_works(groups):
    other = Group(1, WORLD, dist.HashStore())

    def call(r):
        extra = {"tp_group": other} if r == 1 else {}
        return create_shared_segment("py-calls-two", X, comm_group=groups[r], pages="base",
                                     timeout=10, **extra)
    for r, e in enumerate(each_rank(call)):
        assert isinstance(e, SharedSegmentValueError), f"rank {r}: {e!r}"
        assert "rank 1 failed in setup: comm_group= and tp_group= name different" in str(e)
    assert_shared(shares(groups, "py-calls-two-after"))


def test_a_coordinator_at_odds_with_its_cpu_group_is_every_ranks_error(groups):
    def call(r):
        coord = Coordinator(groups[r], (r + 1) % WORLD if r == 2 else r)
        return create_shared_segment("py-calls-coord", X, tp_group=coord, pages="base",
                                     timeout=10)
    for r, e in enumerate(each_rank(call)):
        assert isinstance(e, SharedSegmentValueError), f"rank {r}: {e!r}"
        assert "rank 2 failed in setup: the coordinator says world_size=3, rank_in_group=0" \
            in str(e), str(e)
    assert_shared(shares(groups, "py-calls-coord-after"))


def test_a_rank_that_missed_a_call_meets_the_others_at_their_next(groups):
    def call(r):
        if r == 2:  # raises before its call reaches the store
            return create_shared_segment("py-calls-missed", X, comm_group=groups[r],
                                         exchange=lambda mine: [mine])
        return create_shared_segment("py-calls-missed", X, comm_group=groups[r],
                                     pages="base", timeout=0.5)
    results = each_rank(call)
    assert isinstance(results[2], ValueError) and "either comm_group" in str(results[2])
    for e in results[:2]:
        assert isinstance(e, SharedSegmentError) and e.errno == errno.ETIMEDOUT, repr(e)
        assert e.missing == [2], repr(e)
    # Twice: the rank that missed one call is in step again.
    assert_shared(shares(groups, "py-calls-missed-after"))
    assert_shared(shares(groups, "py-calls-missed-again"))
