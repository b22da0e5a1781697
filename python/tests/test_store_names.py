# SPDX-License-Identifier: Apache-2.0
"""Concurrent calls on one group. Over a Store they pair up by segment
name, so two threads per rank creating different segments meet whatever
order they start in; over a collective, calls on one group take turns in
a process (the collective pairs by order), and a call that failed gives
the next its turn."""
import threading

import pytest
import torch.distributed as dist

from sharedseg import SharedSegmentError, _links, _store_link, create_shared_segment

X = {"x": (2, (16,), "int32")}


class Group:
    """vLLM's StatelessProcessGroup, as far as the package uses it."""

    def __init__(self, rank, world_size, store):
        self.rank, self.world_size, self.store = rank, world_size, store


def test_concurrent_calls_for_different_names_pair_up_by_name(monkeypatch):
    store = dist.HashStore()
    groups = [Group(r, 2, store) for r in range(2)]
    opened = {}
    original = _store_link.StoreLink.open_call

    def open_call(link, *args, **kwargs):
        original(link, *args, **kwargs)
        opened[(link.rank, link.name)].set()
    monkeypatch.setattr(_store_link.StoreLink, "open_call", open_call)
    results, threads = {}, []

    def call(rank, name):
        try:
            with create_shared_segment(name, X, comm_group=groups[rank], pages="base",
                                       timeout=20) as seg:
                results[(rank, name)] = seg.name
        except BaseException as e:  # reported below
            results[(rank, name)] = e
    # Rank 0 opens t1 then t2, rank 1 t2 then t1: by arrival order, rank
    # 0's t1 would meet rank 1's t2.
    for rank, name in ((0, "py-names-t1"), (0, "py-names-t2"), (1, "py-names-t2"),
                       (1, "py-names-t1")):
        opened[(rank, name)] = threading.Event()
        threads.append(threading.Thread(target=call, args=(rank, name)))
        threads[-1].start()
        assert opened[(rank, name)].wait(30), f"rank {rank} did not open {name}"
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a call did not end within 60 s"
    for (rank, name), got in sorted(results.items()):
        assert got == name, f"rank {rank}, {name}: {got!r}"


def test_calls_over_a_collective_take_turns_per_group():
    group = object()
    first = _links.CollectiveLink(group, 0, 2, "a test group")
    first.open_call("py-turn-1", 5.0)
    second = _links.CollectiveLink(group, 0, 2, "a test group")
    with pytest.raises(SharedSegmentError, match="another thread's create_shared_segment "
                                                 "call on a test group did not end within"):
        second.open_call("py-turn-2", 0.05)
    elsewhere = _links.CollectiveLink(object(), 0, 2, "another group")
    elsewhere.open_call("py-turn-3", 0.05)  # another group does not wait
    elsewhere.end_call()
    first.end_call()
    second.open_call("py-turn-2", 0.05)
    second.end_call()


class Comm:
    """An mpi4py communicator of one rank whose all-gather fails."""

    def Get_size(self):
        return 1

    def Get_rank(self):
        return 0

    def allgather(self, mine):
        raise RuntimeError("the communicator failed")


def test_a_failed_call_over_a_collective_gives_the_next_its_turn():
    comm = Comm()
    for _ in range(2):  # the second would wait for a turn the first kept
        with pytest.raises(SharedSegmentError, match="the communicator failed"):
            create_shared_segment("py-turn-failed", X, comm_group=comm, pages="base",
                                  timeout=0.1)
