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
  complete) with that reason.
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
import logging
import struct
import sys
import threading
import time
import zlib
from typing import Any, Callable, Dict, List, Optional
from urllib.parse import quote

from ._group import ranks_text
from ._native import SharedSegmentError
from ._options import DEFAULT_TIMEOUT_S

log = logging.getLogger("sharedseg")

# How often a waiting rank looks whether another rank gave up.
_LOOK_S = 0.25
_PAUSE_MAX_S = 0.05
# A Store value travels as counters of 8 bytes; a reason to give up is cut here.
_CHUNK = struct.Struct("<q")
_WHY_MAX = 2048
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
        """Every rank read every round of this call."""

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


class _Garbled(Exception):
    """A value in the store that no rank of the group can have written."""


def _put(store: Any, key: str, data: bytes, keys: List[str]) -> None:
    """Writes data under key as counters: KEY/0, KEY/1, ... (8 bytes of its
    zlib stream each), then KEY/len. An add() answers 8 bytes whatever a
    writer left there, where get() would read a value whole, so a reader
    never takes in more than it asked for. A counter that did not start at
    0 was written by someone else."""
    packed = zlib.compress(data)
    packed += b"\0" * (-len(packed) % _CHUNK.size)
    words = [w for (w,) in _CHUNK.iter_unpack(packed)]
    for key_i, word in [(f"{key}/{i}", w) for i, w in enumerate(words)] + [
            (f"{key}/len", len(packed))]:
        keys.append(key_i)
        if store.add(key_i, word) != word:
            raise _Garbled(f"{key_i} held a value before this rank wrote it")


def _get(store: Any, key: str, most: int, keys: List[str]) -> Optional[bytes]:
    """What _put wrote under key, at most `most` bytes; None while nothing is."""
    keys.append(f"{key}/len")
    length = store.add(f"{key}/len", 0)
    if length == 0:
        return None
    bound = most + most // 8 + 64  # zlib's worst case, with room
    if not 0 < length <= bound or length % _CHUNK.size:
        raise _Garbled(f"{key}/len says {length} bytes, where at most {bound} are written")
    raw = bytearray()
    for i in range(length // _CHUNK.size):
        keys.append(f"{key}/{i}")
        raw += _CHUNK.pack(store.add(f"{key}/{i}", 0))
    inflate = zlib.decompressobj()
    try:
        data = inflate.decompress(bytes(raw), most + 1)
    except zlib.error as e:
        raise _Garbled(f"{key} does not decompress ({e})") from None
    if len(data) > most or not inflate.eof:
        raise _Garbled(f"{key} holds no zlib stream of at most {most} bytes")
    return data


class StoreLink(Link):
    """All-gathers through a c10d Store. Calls pair up by segment name:
    every rank counts its own calls of each name, so the n-th call for a
    name on every rank meets under one prefix whatever else uses the store,
    and calls for different names may run at once from several threads. A
    call the others already gave up on is passed over, so a rank that
    missed one (it raised before counting, or never called) meets them at
    their next. Per round: each rank's value (_put) and one shared count.

    The store is open to whoever reaches it, so nothing read there is
    trusted to be there, or to be small: only add() reads it (8 bytes, and
    it never waits for a key, unlike get() which waits the store's own
    timeout), every wait is the caller's deadline, and what no rank can have
    written is an error naming the key."""
    timed = True

    def __init__(self, store: Any, rank: int, size: int, what: str, space: str = ""):
        self.store, self.rank, self.size, self.what = store, rank, size, what
        # torch 1.x keeps one store for all its groups: keys carry the group's name.
        self.space = f"sharedseg/{space}/" if space else "sharedseg/"
        self.prefix = ""
        self.labels: List[str] = []
        self.keys: List[str] = []  # every key this call wrote or read
        self.told = False

    def open_call(self, name, wait_s=_OPEN_S):
        self.name = name
        stem = f"{self.space}{quote(name, safe='')}"
        counter = f"{self.space}calls/{quote(name, safe='')}/{self.rank}"
        deadline, passed = time.monotonic() + wait_s, 0
        n = self.store.add(counter, 1)
        while self.store.add(f"{stem}/{n}/gave-up", 0):
            if time.monotonic() >= deadline:
                raise _timed_out(
                    f"segment '{name}': {passed + 1} calls in a row were marked given up "
                    f"(rank {self.rank} passed over them for {round(wait_s, 1):g} s, its "
                    f"timeout): ranks give up one call at a time, so a writer other than the "
                    f"ranks of this group is marking calls on {self.what}")
            n = self.store.add(counter, 1)
            passed += 1
        self.prefix = f"{stem}/{n}"
        self.labels = []
        self.keys = [f"{self.prefix}/{k}" for k in ("done", "gave-up")]

    def _garbled(self, what: str, e: Exception) -> SharedSegmentError:
        err = SharedSegmentError(
            f"segment '{self.name}': {what} on {self.what}: {e}; no rank of this group "
            f"writes that, so something else writes this store's sharedseg keys")
        err.errno = errno.EPROTO
        return err

    def _read(self, key: str, most: int, what: str) -> Optional[bytes]:
        try:
            return _get(self.store, key, most, self.keys)
        except _Garbled as e:
            raise self._garbled(what, e) from None
        except Exception as e:
            err = SharedSegmentError(
                f"segment '{self.name}': reading {what} ({self.keys[-1]}) on {self.what} "
                f"failed: {type(e).__name__}: {e}; TCPStore drops a client that adds to a "
                f"value that is not a number, which no rank of this group writes")
            err.errno = getattr(e, "errno", 0) or errno.EIO
            raise err from e

    def _given_up(self) -> Optional[str]:
        if self.store.add(f"{self.prefix}/gave-up", 0) == 0:
            return None
        for r in range(self.size):
            try:
                why = self._read(f"{self.prefix}/why/{r}", _WHY_MAX, f"rank {r}'s reason")
            except SharedSegmentError as e:
                return str(e)
            if why is not None:
                return why.decode("utf-8", "replace")
        return ("the call was marked given up with no reason given, which a rank of this "
                "group never does: something else writes this store's sharedseg keys")

    def _raise_if_given_up(self) -> None:
        why = self._given_up()
        if why is not None:
            raise _timed_out(f"segment '{self.name}': {why}; rank {self.rank} arrived later "
                             f"and gives up too")

    def give_up(self, why):
        if self.told or not self.prefix:  # told already, or not in a call
            return
        self.told = True
        try:
            _put(self.store, f"{self.prefix}/why/{self.rank}",
                 why.encode("utf-8", "replace")[:_WHY_MAX], self.keys)
        finally:
            self.store.add(f"{self.prefix}/gave-up", 1)

    def _give_up(self, label: str, missing: List[int], counted: bool,
                 wait_s: float) -> SharedSegmentError:
        within = f"within {round(wait_s, 1):g} s (over {self.what})"
        if counted:
            text = (f"the {label} exchange's count says every rank arrived, but "
                    f"{ranks_text(missing)} wrote no value there {within}: something else "
                    f"writes this store's sharedseg keys")
        else:
            text = f"{ranks_text(missing)} did not reach the {label} exchange {within}"
            if label == "setup":  # a rank that named another segment never meets this one
                text += f" for a segment named '{self.name}'"
        try:
            self.give_up(f"rank {self.rank} gave up: {text}")
        except Exception as e:  # the store may be what failed
            log.debug("segment '%s': could not tell the other ranks: %s", self.name, e)
        return _timed_out(
            f"segment '{self.name}': {text}; every rank gives up on this segment, and the "
            f"group itself was not used: it stays usable", missing)

    def _collect(self, base: str, label: str, got: List[Optional[bytes]], most: int) -> None:
        for r in range(self.size):
            if got[r] is None:
                got[r] = self._read(f"{base}/{r}", most, f"rank {r}'s {label} value")

    def gather(self, label, mine, wait_s, size):
        base = f"{self.prefix}/{label}"
        self.labels.append(label)
        self.keys.append(f"{base}/count")
        self._raise_if_given_up()
        try:
            _put(self.store, f"{base}/{self.rank}", bytes(mine), self.keys)
        except _Garbled as e:
            raise self._garbled(f"rank {self.rank}'s {label} value", e) from None
        got: List[Optional[bytes]] = [None] * self.size
        got[self.rank] = bytes(mine)
        counted = self.store.add(f"{base}/count", 1) >= self.size
        now = time.monotonic()
        deadline, look, pause = now + wait_s, now + _LOOK_S, 0.001
        while True:
            if counted or now >= deadline:  # at the deadline, whatever the count says
                self._collect(base, label, got, len(mine))
            missing = [r for r, g in enumerate(got) if g is None]
            if not missing:
                break
            if now >= deadline:
                raise self._give_up(label, missing, counted, wait_s)
            if now >= look:
                self._raise_if_given_up()
                look = now + _LOOK_S
            time.sleep(min(pause, max(0.0, deadline - now)))
            pause = min(pause * 2, _PAUSE_MAX_S)
            counted = counted or self.store.add(f"{base}/count", 0) >= self.size
            now = time.monotonic()
        self._raise_if_given_up()
        return got

    def watch(self):
        state = {"next": time.monotonic() + _LOOK_S}

        def check():
            now = time.monotonic()
            if now >= state["next"]:
                state["next"] = now + _LOOK_S
                self._raise_if_given_up()
        return check

    def close_call(self):
        # Every rank wrote its value of the last round after reading the
        # rounds before: each removes its own values of those now, and the
        # last rank to finish the rest. The call counters stay, one per name.
        earlier = tuple(f"{self.prefix}/{label}/" for label in self.labels[:-1])
        values = {k for k in self.keys if k.startswith(earlier) and not k.endswith("/count")}
        own = tuple(f"{e}{self.rank}/" for e in earlier)
        self._delete([k for k in values if k.startswith(own)])
        if self.store.add(f"{self.prefix}/done", 1) >= self.size:
            self._delete([k for k in self.keys if k not in values])

    def _delete(self, keys: List[str]) -> None:
        try:
            for key in dict.fromkeys(keys):
                self.store.delete_key(key)
        except Exception as e:  # a store without delete_key keeps a few KiB
            log.debug("segment '%s': the store kept this call's keys: %s", self.name, e)


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
            self.device = _collective_device(torch, self.group)
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


_ACCELERATOR_OF = {"nccl": "cuda", "hccl": "npu", "xccl": "xpu"}


def collective_kind(group: Any) -> str:
    """The device type for a group's collective, as torch's object
    collectives choose it: "cpu" when the group has a CPU backend, else its
    device's ("cuda" for NCCL, "npu" for HCCL, "xpu" for XCCL)."""
    types = getattr(group, "_device_types", None)  # a ProcessGroup of torch 2.x
    if types:
        kinds = [d.type for d in types]
        return "cpu" if "cpu" in kinds else kinds[0]
    # torch 1.x process groups and 2.x backends name themselves.
    name = str(group.name() if hasattr(group, "name") else "").lower()
    return next((dev for word, dev in _ACCELERATOR_OF.items() if word in name), "cpu")


def _collective_device(torch: Any, group: Any) -> Any:
    """collective_kind's device, at the current index of that type."""
    kind = collective_kind(group)
    if kind == "cpu":
        return torch.device("cpu")
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "current_device_index"):
        index = accelerator.current_device_index()
    else:
        index = getattr(torch, kind).current_device()
    return torch.device(kind, index)


def _torch_dist() -> Any:
    """torch.distributed when the process already imported torch."""
    if "torch" not in sys.modules:
        return None
    import torch.distributed as dist
    return dist if dist.is_available() else None


def _registry(dist: Any, table: str) -> Any:
    """torch.distributed's table of registered groups (torch 2.x: _world.X,
    1.x: _X)."""
    c10d = dist.distributed_c10d
    found = getattr(getattr(c10d, "_world", None), table, None)
    return found if found is not None else getattr(c10d, "_" + table, {})


def _group_name(dist: Any, group: Any) -> str:
    """The name torch gave a group, the same on every rank of it."""
    return str(_registry(dist, "pg_names").get(group) or getattr(group, "group_name", "") or "")


def _registered_store(dist: Any, group: Any) -> Any:
    entry = _registry(dist, "pg_map").get(group)
    if entry is not None and entry[1] is not None:
        return entry[1]
    getter = getattr(group, "get_group_store", None)
    if getter is not None:
        try:
            return getter()
        except RuntimeError:  # a group built without one
            return None
    return None


def _group_types(dist: Any) -> tuple:
    import torch
    backend = getattr(torch._C._distributed_c10d, "Backend", None)
    return (dist.ProcessGroup,) + ((backend,) if isinstance(backend, type) else ())


def _is_coordinator(obj: Any) -> bool:
    """vLLM's and SGLang's GroupCoordinator: cpu_group, rank_in_group, world_size."""
    return all(hasattr(obj, a) for a in ("cpu_group", "rank_in_group", "world_size"))


def _is_stateless(dist: Any, obj: Any) -> bool:
    """vLLM's StatelessProcessGroup: rank, world_size and a c10d store."""
    return (dist is not None and isinstance(getattr(obj, "store", None), dist.Store) and
            isinstance(getattr(obj, "rank", None), int) and
            isinstance(getattr(obj, "world_size", None), int))


def _torch_link(dist: Any, group: Any, what: str) -> Link:
    rank, size = group.rank(), group.size()
    store = _registered_store(dist, group)
    if store is not None:
        return StoreLink(store, rank, size, f"the store of {what}", _group_name(dist, group))
    return CollectiveLink(group, rank, size, what)


def link_for(group: Any) -> Link:
    """The link to a group the caller named; TypeError or ValueError, at
    once and on this rank only, for what cannot be a group. A coordinator
    that disagrees with its cpu_group still gives that group's link, with
    the mistake for setup to report."""
    dist = _torch_dist()
    if dist is not None and (group is dist.GroupMember.NON_GROUP_MEMBER or (
            isinstance(group, int) and not isinstance(group, bool) and group == -100)):
        raise ValueError("comm_group is torch's NON_GROUP_MEMBER: this process is not in "
                         "that group (new_group returns it to processes outside its ranks)")
    if _is_coordinator(group):
        link = link_for(group.cpu_group)
        if (link.size, link.rank) != (group.world_size, group.rank_in_group):
            link.mistake = ValueError(
                f"the coordinator says world_size={group.world_size}, "
                f"rank_in_group={group.rank_in_group}, but its cpu_group has {link.size} "
                f"ranks and this process is rank {link.rank} in it")
        link.what = f"{link.what} (the coordinator's cpu_group)"
        return link
    if dist is not None and isinstance(group, _group_types(dist)):
        return _torch_link(dist, group, f"the torch.distributed group ({type(group).__name__})")
    if _is_stateless(dist, group):
        return StoreLink(group.store, group.rank, group.world_size,
                         "the StatelessProcessGroup's store")
    if type(group).__module__.startswith("mpi4py") or (
            hasattr(group, "allgather") and hasattr(group, "Get_rank")):
        return MpiLink(group)
    if callable(group):
        return CallableLink(group)
    raise TypeError(
        f"comm_group must be a torch.distributed group (a ProcessGroup, a c10d backend "
        f"such as ProcessGroupGloo, a vLLM/SGLang GroupCoordinator, a vLLM "
        f"StatelessProcessGroup), an mpi4py communicator or a callable, not "
        f"{type(group).__name__}")


def _default_link(world_size: Optional[int]) -> Link:
    """No group named: world_size 1 needs none; more ranks use the default
    torch.distributed group only when it has exactly world_size ranks."""
    if world_size in (None, 1):
        return Alone()
    dist = _torch_dist()
    if dist is None or not dist.is_initialized():
        raise ValueError(
            f"world_size={world_size} needs an exchange: pass comm_group= (a torch.distributed "
            f"group, a vLLM/SGLang coordinator or an mpi4py communicator), or exchange= (a "
            f"callable), or initialise torch.distributed so its default group can be used")
    world = dist.group.WORLD
    if world.size() != world_size:
        raise ValueError(
            f"world_size={world_size}, but the default torch.distributed group has "
            f"{world.size()} ranks: pass the group of these {world_size} ranks as comm_group= "
            f"(the default group is used only when it is exactly that group)")
    return _torch_link(dist, world, "the default torch.distributed group")


def resolve(group: Any, exchange: Any, world_size: Optional[int]) -> Link:
    """The link for this call. Its errors are raised at once, on this rank:
    a rank that cannot name its group cannot tell the others anything."""
    if exchange is not None:
        if group is not None:
            raise ValueError("pass either comm_group=/tp_group= or exchange=, not both")
        if not callable(exchange):
            raise TypeError(f"exchange must be callable, not {type(exchange).__name__}")
        return CallableLink(exchange)
    if group is None:
        return _default_link(world_size)
    return link_for(group)


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
