# SPDX-License-Identifier: Apache-2.0
"""How the ranks reach each other between the C library's two phases: one
fixed-size all-gather per round (setup status, blobs, complete status).
The C library never calls back into Python; these run between its phases.

The link to a group is chosen once, best first:

- the group's Store (a torch.distributed group, registered or carrying its
  store; a vLLM or SGLang coordinator through its cpu_group; vLLM's
  StatelessProcessGroup): keys under "sharedseg/", never a collective of
  the group, so a timeout leaves the group exactly as it was. Calls pair
  up by segment name. Whoever reaches a TCPStore's port writes its keys,
  so values travel as counters (add() answers 8 bytes and never waits for
  a key), every wait is the caller's, and a value no rank can have written
  is an error naming its key. A rank that gives up writes why; the others
  stop at their next look (within 0.25 s, also while they wait in
  complete) with that reason. A call ends once every rank has read its
  outcome: the process hosting the store (rank 0's TCPStore) may exit the
  moment its call returns without breaking another rank's last read.
- the group's own all-gather, for a group torch holds no store for (a raw
  c10d backend such as ProcessGroupGloo, an unregistered group on a torch
  without ProcessGroup.get_group_store): CPU tensors where the group has a
  CPU backend, else tensors on its device, completion polled against the
  deadline. Never Work.wait(timeout): on torch >= 2.1 a timed-out NCCL
  wait aborts the communicator. Calls pair up by their order: a process
  makes one at a time per group.
- an mpi4py communicator (one call at a time per communicator, like a
  group's all-gather), or a callable: blocking, no timeout of ours.
"""
import errno
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from . import _backends
from ._log import log
from ._native import SharedSegmentError
from ._options import DEFAULT_TIMEOUT_S


_PAUSE_MAX_S = 0.05
# How long open_call passes over given-up calls when the caller gave no timeout.
_OPEN_S = DEFAULT_TIMEOUT_S


def _timed_out(text: str, missing: Optional[List[int]] = None) -> SharedSegmentError:
    err = SharedSegmentError(text)
    err.errno = errno.ETIMEDOUT
    err.missing = missing or []
    return err


class Link:
    """One way to all-gather fixed-size bytes among the ranks."""
    what = "the exchange"
    size: Optional[int] = None  # the group's size; None: the caller's world_size
    rank: Optional[int] = None  # this process's rank in it
    timed = False               # honours a deadline
    # An argument mistake found while choosing the link, raised in setup so
    # that it reaches every rank as an agreed error and this rank's call
    # still counts (a rank that raised before counting would fall a call
    # behind the others on a Store).
    mistake: Optional[Exception] = None

    def open_call(self, name: str, wait_s: float = _OPEN_S) -> None:
        """Starts one create_shared_segment call."""
        self.name = name

    def end_call(self) -> None:
        """The call is over, however it ended."""

    def gather(self, label: str, mine: bytes, wait_s: float, size: int) -> List[bytes]:
        raise NotImplementedError

    def watch(self) -> Optional[Callable[[], None]]:
        """A check for complete's wait: raises when the call was given up."""
        return None

    def close_call(self) -> None:
        """This rank read every round of this call. Over a Store, returns
        once every rank has (bounded): the store's host may exit then."""

    def give_up(self, why: str) -> None:
        """Tells the ranks still waiting in this call to stop, with why."""


class Alone(Link):
    what = "no exchange (world_size 1)"
    size, rank = 1, 0

    def gather(self, label, mine, wait_s, size):
        return [bytes(mine)]


class CallableLink(Link):
    def __init__(self, fn: Callable[[bytes], Any]):
        self.fn = fn
        self.what = f"the exchange callable {getattr(fn, '__name__', fn)!r}"

    def gather(self, label, mine, wait_s, size):
        return list(self.fn(bytes(mine)))


class _Serialised(Link):
    """A link whose rounds are collectives: they pair up by their order, so
    one process makes one call at a time on a group (a second thread's call
    waits for the first, up to its timeout); the ranks make them in the same
    order, and calls that pair up wrongly fail on the fingerprint."""
    serialises: Any = None  # the group whose calls take turns
    _turn: Optional[threading.Lock] = None

    def open_call(self, name, wait_s=_OPEN_S):
        self.name = name
        with _TURNS_LOCK:
            turn = _TURNS.setdefault(id(self.serialises), threading.Lock())
        if not turn.acquire(timeout=wait_s):
            raise _timed_out(
                f"segment '{name}': another thread's create_shared_segment call on "
                f"{self.what} did not end within {round(wait_s, 1):g} s; calls over a "
                f"collective pair up by their order, so one process makes one at a time")
        self._turn = turn

    def end_call(self):
        turn, self._turn = self._turn, None
        if turn is not None:
            turn.release()


# One lock per group (by id: some groups take no weak references); a few
# bytes per group the process ever used.
_TURNS: Dict[int, threading.Lock] = {}
_TURNS_LOCK = threading.Lock()


class MpiLink(_Serialised):
    def __init__(self, comm: Any):
        self.comm = self.serialises = comm
        self.what = "the MPI communicator"
        self.size, self.rank = comm.Get_size(), comm.Get_rank()

    def gather(self, label, mine, wait_s, size):
        return self.comm.allgather(bytes(mine))

class CollectiveLink(_Serialised):
    """All-gathers with the group's own collective, polled against the
    deadline. After a timeout the all-gather stays posted on this rank."""
    timed = True

    def __init__(self, group: Any, rank: int, size: int, what: str):
        self.group, self.rank, self.size, self.what = group, rank, size, what
        self.serialises = group
        self.device = None

    def gather(self, label, mine, wait_s, size):
        import torch
        if self.device is None:
            self.device = _backends.collective_device(torch, self.group)
        sent = torch.frombuffer(bytearray(mine), dtype=torch.uint8)
        if self.device.type != "cpu":
            sent = sent.to(self.device)
        got = [torch.empty_like(sent) for _ in range(self.size)]
        work = self.group.allgather([got], [sent])
        deadline, pause = time.monotonic() + wait_s, 0.001
        while not work.is_completed():
            if time.monotonic() >= deadline:
                err = _timed_out(
                    f"segment '{self.name}': the {label} all-gather over {self.what} did not "
                    f"complete within {round(wait_s, 1):g} s: some rank did not call "
                    f"create_shared_segment (a collective cannot tell which; a group with a "
                    f"Store can). The all-gather stays posted: it completes when the missing "
                    f"ranks post theirs, and until then the group's next collective would pair "
                    f"with it. Do not use this group again: destroy it")
                err.pending = work  # what stays posted; completes when the others arrive
                raise err
            time.sleep(pause)
            pause = min(pause * 2, _PAUSE_MAX_S)
        work.wait()  # completed: returns at once, or raises the work's error
        return [bytes(t.cpu().tolist()) for t in got]


def open_call(link: Link, name: str, wait_s: float) -> None:
    try:
        link.open_call(name, wait_s)
    except SharedSegmentError:
        raise
    except Exception as e:
        err = SharedSegmentError(f"segment '{name}': {link.what} failed: {type(e).__name__}: {e}")
        err.errno = getattr(e, "errno", 0) or errno.EIO
        raise err from e


def abandon(link: Link, rank: int, exc: BaseException) -> None:
    """This rank leaves the call with exc, which the others did not agree
    on (Ctrl-C, a failed exchange): tell those still waiting, so they stop
    now instead of at their timeout. Best effort: the link may be what
    failed."""
    if getattr(exc, "agreed", False) or getattr(exc, "errno", 0) == errno.ETIMEDOUT:
        return
    try:
        link.give_up(f"rank {rank} stopped: {type(exc).__name__}: {exc}")
    except Exception as e:
        log.debug("segment '%s': could not tell the other ranks: %s",
                  getattr(link, "name", "?"), e)


def gather(link: Link, label: str, mine: bytes, wait_s: float, size: int) -> List[bytes]:
    """All-gathers mine (fixed length) and checks what came back."""
    try:
        got = link.gather(label, mine, wait_s, size)
    except SharedSegmentError:
        raise
    except Exception as e:
        err = SharedSegmentError(
            f"segment '{link.name}': the all-gather of {label} over {link.what} failed: "
            f"{type(e).__name__}: {e}")
        err.errno = getattr(e, "errno", 0) or errno.EIO
        raise err from e
    if len(got) != size or any(len(g) != len(mine) for g in got):
        sizes = [len(g) for g in got]
        err = SharedSegmentError(
            f"segment '{link.name}': the all-gather of {label} over {link.what} returned "
            f"{len(got)} items of {sizes} bytes; {size} items of {len(mine)} bytes expected")
        err.errno = errno.EPROTO
        raise err
    return [bytes(g) for g in got]
