# SPDX-License-Identifier: Apache-2.0
"""The link over a group's c10d Store: keys under "sharedseg/", values as
counters, every wait the caller's (see _links for why)."""
import errno
import struct
import time
import zlib
from typing import Any, List, Optional
from urllib.parse import quote

from ._errors import ranks_text
from ._links import _OPEN_S, _PAUSE_MAX_S, Link, _timed_out, log
from ._native import SharedSegmentError

# How often a waiting rank looks whether another rank gave up.
_LOOK_S = 0.25
# How long close_call waits for the other ranks to have read the call's
# last round; only a rank that died between reading it and counting itself
# done makes it wait that long. Polled at most this far apart.
_DONE_S = 5.0
_DONE_PAUSE_S = 0.01
# A Store value travels as counters of 8 bytes; a reason to give up is cut here.
_CHUNK = struct.Struct("<q")
_WHY_MAX = 2048


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
        self.keys = [f"{self.prefix}/{k}" for k in ("done", "left", "gave-up")]
        self.wait_s = wait_s

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
        # rounds before: each removes its own values of those now. Then it
        # counts itself done and waits until every rank has: the process
        # that hosts the store (a TCPStore's server lives in one rank's,
        # rank 0's as torch sets it up) may exit the moment its call
        # returns, and the store goes with it, while another rank still
        # reads the last round. The last rank to leave removes the rest;
        # the call counters stay, one per name. This rank has read every
        # round: whatever the store does now, the call's outcome stands.
        earlier = tuple(f"{self.prefix}/{label}/" for label in self.labels[:-1])
        values = {k for k in self.keys if k.startswith(earlier) and not k.endswith("/count")}
        own = tuple(f"{e}{self.rank}/" for e in earlier)
        self._delete([k for k in values if k.startswith(own)])
        try:
            if self.store.add(f"{self.prefix}/done", 1) < self.size:
                self._wait_done()
            if self.store.add(f"{self.prefix}/left", 1) >= self.size:
                self._delete([k for k in self.keys if k not in values])
        except Exception as e:  # the store's host left once every rank was done
            log.debug("segment '%s': the store after the call: %s", self.name, e)

    def _wait_done(self) -> None:
        """Until every rank counted itself done; at most _DONE_S (or the
        call's timeout), and not once a rank gave up on the call."""
        now = time.monotonic()
        deadline, look, pause = now + min(self.wait_s, _DONE_S), now + _LOOK_S, 0.001
        while self.store.add(f"{self.prefix}/done", 0) < self.size:
            now = time.monotonic()
            if now >= deadline:
                log.debug("segment '%s': not every rank of %s said it was done within %g s",
                          self.name, self.what, min(self.wait_s, _DONE_S))
                return
            if now >= look:
                if self.store.add(f"{self.prefix}/gave-up", 0):
                    return
                look = now + _LOOK_S
            time.sleep(min(pause, deadline - now))
            pause = min(pause * 2, _DONE_PAUSE_S)

    def _delete(self, keys: List[str]) -> None:
        try:
            for key in dict.fromkeys(keys):
                self.store.delete_key(key)
        except Exception as e:  # a store without delete_key keeps a few KiB
            log.debug("segment '%s': the store kept this call's keys: %s", self.name, e)
