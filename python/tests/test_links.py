# SPDX-License-Identifier: Apache-2.0
"""The CPU-side logic of the group links, without a GPU: which device an
NCCL (or HCCL, XCCL) group's all-gather uses, that a collective is polled
against the deadline and never waited on with a timeout (torch >= 2.1
aborts an NCCL communicator whose wait(timeout) fires), how groups and
coordinators are recognised, and what is refused before any collective.
The NCCL runs themselves are python/tests/helpers/gpu_nccl.py (tests/gpu/run.sh)."""
import errno
import time

import pytest
import torch

from sharedseg import SharedSegmentError, _backends, _frameworks, _links, _store_link


class FakeWork:
    """A Work whose all-gather completes after `after` polls (never: None)."""

    def __init__(self, outputs, after):
        self.outputs, self.after, self.polls, self.waits = outputs, after, 0, []

    def is_completed(self):
        self.polls += 1
        return self.after is not None and self.polls > self.after

    def wait(self, *args, **kwargs):
        self.waits.append((args, kwargs))
        for r, t in enumerate(self.outputs):
            t.fill_(r)
        return True


class FakeNcclGroup:
    """The surface of a c10d NCCL backend that the link uses."""

    def __init__(self, size, after):
        self._size, self.after, self.works = size, after, []

    def name(self):
        return "nccl"

    def rank(self):
        return 0

    def size(self):
        return self._size

    def allgather(self, outputs, inputs):
        self.works.append(FakeWork(outputs[0], self.after))
        return self.works[-1]


def link_for(group):
    link = _links.CollectiveLink(group, group.rank(), group.size(), "a fake NCCL group")
    link.open_call("py-links")
    link.device = torch.device("cpu")  # the device choice is tested below
    return link


def test_an_nccl_all_gather_is_polled_then_waited_without_a_timeout():
    group = FakeNcclGroup(3, after=4)
    got = _links.gather(link_for(group), "blobs", b"\1" * 8, 5.0, 3)
    assert got == [bytes([r]) * 8 for r in range(3)]
    (work,) = group.works
    assert work.polls == 5 and work.waits == [((), {})]  # completed, then wait() bare


def test_an_nccl_timeout_never_calls_wait_and_leaves_the_work_posted():
    group = FakeNcclGroup(2, after=None)
    t0 = time.monotonic()
    with pytest.raises(SharedSegmentError) as info:
        _links.gather(link_for(group), "blobs", b"\1" * 8, 0.3, 2)
    took = time.monotonic() - t0
    (work,) = group.works
    assert work.waits == [], "Work.wait was called: with a timeout it aborts NCCL"
    assert info.value.errno == errno.ETIMEDOUT and info.value.pending is work
    assert "did not complete within 0.3 s" in str(info.value) and 0.3 <= took < 0.6
    assert "destroy it" in str(info.value)


@pytest.mark.parametrize("word,kind", [("nccl", "cuda"), ("hccl", "npu"), ("xccl", "xpu"),
                                       ("gloo", "cpu"), ("mpi", "cpu"), ("ucc", "cpu")])
def test_the_device_follows_the_backend_name(word, kind):
    class Named:
        def name(self):
            return word
    assert _backends.collective_kind(Named()) == kind


@pytest.mark.parametrize("types,kind", [
    (["cuda"], "cuda"), (["cpu", "cuda"], "cpu"), (["cuda", "cpu"], "cpu"), (["xpu"], "xpu"),
    (["cpu"], "cpu"), ([], "cpu")])
def test_a_torch2_group_uses_cpu_when_it_has_a_cpu_backend(types, kind):
    class Typed:
        _device_types = [torch.device(t) for t in types]

        def name(self):
            return "undefined"
    assert _backends.collective_kind(Typed()) == kind


def test_an_nccl_groups_tensors_go_to_the_current_cuda_device(monkeypatch):
    """The index: torch.accelerator's where torch has it, else torch.cuda's."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "current_device_index"):
        monkeypatch.setattr(accelerator, "current_device_index", lambda: 3)
    else:
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    assert _backends.collective_device(torch, FakeNcclGroup(2, 0)) == torch.device("cuda", 3)


def test_coordinators_and_stateless_groups_are_recognised():
    import torch.distributed as dist
    store = dist.HashStore()

    class Stateless:
        rank, world_size = 1, 3

        def __init__(self):
            self.store = store
    link = _frameworks.link_for(Stateless())
    assert isinstance(link, _store_link.StoreLink) and (link.rank, link.size) == (1, 3)

    class Coordinator:
        cpu_group, rank_in_group, world_size = Stateless(), 1, 3
    link = _frameworks.link_for(Coordinator())
    assert isinstance(link, _store_link.StoreLink) and "coordinator's cpu_group" in link.what

    class Confused:
        cpu_group, rank_in_group, world_size = Stateless(), 0, 3
    # Its cpu_group's link all the same, with the mistake for setup to report
    # to every rank (test_store_calls.py).
    link = _frameworks.link_for(Confused())
    assert isinstance(link, _store_link.StoreLink) and (link.rank, link.size) == (1, 3)
    assert "rank_in_group=0, but its cpu_group" in str(link.mistake)


def test_what_cannot_be_a_group_is_refused_at_once():
    import torch.distributed as dist
    with pytest.raises(ValueError, match="NON_GROUP_MEMBER"):
        _frameworks.link_for(dist.GroupMember.NON_GROUP_MEMBER)
    with pytest.raises(TypeError, match="comm_group must be a torch.distributed group"):
        _frameworks.link_for(42)
    with pytest.raises(ValueError, match="either comm_group=/tp_group= or exchange="):
        _frameworks.resolve(lambda m: [m], lambda m: [m], 1)
    with pytest.raises(TypeError, match="exchange must be callable"):
        _frameworks.resolve(None, "not callable", 1)
    assert isinstance(_frameworks.resolve(None, None, None), _links.Alone)
    with pytest.raises(ValueError, match="world_size=2 needs an exchange"):
        _frameworks.resolve(None, None, 2)


def test_a_store_round_names_the_missing_ranks_and_marks_the_call_given_up():
    import torch.distributed as dist
    store = dist.HashStore()
    link = _store_link.StoreLink(store, 0, 3, "a test store")
    link.open_call("py-links-store")
    late = _store_link.StoreLink(store, 1, 3, "a test store")
    late.open_call("py-links-store")  # in the call, but slow to reach setup
    _store_link._put(store, f"{link.prefix}/setup/2", b"z" * 4, [])  # rank 2 arrived;
    store.add(f"{link.prefix}/setup/count", 1)                      # rank 1 did not
    with pytest.raises(SharedSegmentError) as info:
        link.gather("setup", b"x" * 4, 0.2, 3)
    assert info.value.missing == [1] and info.value.errno == errno.ETIMEDOUT
    assert "rank 1 did not reach the setup exchange within 0.2 s" in str(info.value)
    assert store.add("sharedseg/py-links-store/1/gave-up", 0) == 1
    with pytest.raises(SharedSegmentError, match="rank 0 gave up: rank 1 did not reach"):
        late.gather("setup", b"y" * 4, 5.0, 3)
    # A rank that opens the call only now passes over it: it meets the
    # others at their next call.
    missed = _store_link.StoreLink(store, 2, 3, "a test store")
    missed.open_call("py-links-store")
    assert missed.prefix == "sharedseg/py-links-store/2"
    assert store.add("sharedseg/calls/py-links-store/2", 0) == 2
