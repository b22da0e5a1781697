# SPDX-License-Identifier: Apache-2.0
"""The errors every rank raises alike, and the status records they come
from: what the ranks tell each other besides the blobs, one fixed-size
record per rank (did this rank get through its phase, and if not, why), so
that a failure on any rank becomes the same exception on every rank. The
record is the library's frame (src/frame.h, kind STATUS: errno, the phase,
the error's kind, then 32 bytes of host identity and the sentence),
written and read by the library."""
import errno as errnos
from typing import Dict, List, Optional, Tuple

from . import _native
from ._native import SharedSegmentError

RECORD_SIZE = 512
PHASES = ("setup", "create", "complete")
_HOST_ID = 32

# What kind of mistake a failure is, so that every rank raises the type a
# caller catches: an argument (ValueError/TypeError) or anything else.
KIND_FAILURE, KIND_VALUE, KIND_TYPE = 0, 1, 2
# The library's answers to arguments it refuses, or that ranks disagree on.
_ARGUMENT_ERRNOS = (errnos.EINVAL, errnos.EOVERFLOW)


class SharedSegmentValueError(SharedSegmentError, ValueError):
    """An argument was refused, on some rank; every rank raises it alike."""


class SharedSegmentTypeError(SharedSegmentError, TypeError):
    """An argument was of the wrong type, on some rank; every rank raises it alike."""


class SharedSegmentKeyError(SharedSegmentError, KeyError):
    """A block the segment was not made with (seg.tensors("x")): a KeyError,
    and the SharedSegmentError a program written against Mooncake's
    shared_segment catches there."""


_KINDS = {KIND_FAILURE: SharedSegmentError, KIND_VALUE: SharedSegmentValueError,
          KIND_TYPE: SharedSegmentTypeError}


def _kind(exc: BaseException, err: int) -> int:
    if isinstance(exc, TypeError):
        return KIND_TYPE
    if isinstance(exc, ValueError) or err in _ARGUMENT_ERRNOS:
        return KIND_VALUE
    return KIND_FAILURE


def errno_of(exc: BaseException) -> int:
    """The errno a failure is reported with; never 0."""
    err = getattr(exc, "errno", 0) or 0
    if err:
        return err
    if isinstance(exc, (ValueError, TypeError)):
        return errnos.EINVAL
    if isinstance(exc, TimeoutError):
        return errnos.ETIMEDOUT
    return errnos.EIO


class Status:
    __slots__ = ("ok", "phase", "kind", "errno", "message", "host_id")

    def __init__(self, ok: bool = True, phase: str = "setup", errno: int = 0, message: str = "",
                 host_id: bytes = b"", kind: Optional[int] = None):
        self.ok, self.phase, self.errno = ok, phase, errno
        self.kind = kind if kind is not None else (
            KIND_VALUE if errno in _ARGUMENT_ERRNOS else KIND_FAILURE)
        self.message, self.host_id = message, host_id

    @classmethod
    def failed(cls, phase: str, exc: BaseException) -> "Status":
        err = errno_of(exc)
        return cls(False, phase, err, _describe(exc), kind=_kind(exc, err))

    def encode(self) -> bytes:
        # A failure always carries an errno: 0 is what says a rank got through.
        err = 0 if self.ok else (self.errno if 0 < self.errno < 4096 else errnos.EIO)
        body = self.host_id[:_HOST_ID].ljust(_HOST_ID, b"\0") + \
            self.message.encode("utf-8", "replace")
        return _native.status_record(RECORD_SIZE, err, PHASES.index(self.phase), self.kind, body)

    @classmethod
    def decode(cls, rank: int, raw: bytes) -> "Status":
        try:
            if len(raw) != RECORD_SIZE:
                raise SharedSegmentError(f"{len(raw)} bytes, not {RECORD_SIZE}")
            err, phase, kind, body = _native.status_read(bytes(raw))
        except SharedSegmentError as e:
            raise SharedSegmentError(
                f"rank {rank}'s status record: {e}: the exchange returned something other "
                f"than what rank {rank} sent") from None
        message = body[_HOST_ID:].decode("utf-8", "replace")
        return cls(err == 0, PHASES[min(phase, len(PHASES) - 1)], err, message,
                   bytes(body[:_HOST_ID]), kind if kind in _KINDS else KIND_FAILURE)


def _describe(exc: BaseException) -> str:
    """The sentence alone for the errors arguments make; the type for the rest."""
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    if isinstance(exc, (SharedSegmentError, ValueError, TypeError)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def ranks_text(ranks: List[int]) -> str:
    """[0, 1, 2, 5] -> 'ranks 0-2, 5'; [3] -> 'rank 3'."""
    ranks = sorted(ranks)
    spans = []
    start = prev = ranks[0]
    for r in ranks[1:] + [None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = r
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(spans)


def failure(name: str, statuses: List[Status]) -> Optional[SharedSegmentError]:
    """The exception every rank raises, or None when all succeeded. The
    earliest phase that failed is the cause; later failures follow it. Its
    type is the lowest such rank's kind: SharedSegmentValueError or
    SharedSegmentTypeError for arguments, else SharedSegmentError."""
    failed = {r: s for r, s in enumerate(statuses) if not s.ok}
    if not failed:
        return None
    first = min(PHASES.index(s.phase) for s in failed.values())
    by_message: Dict[str, List[int]] = {}
    for r, s in failed.items():
        if PHASES.index(s.phase) == first:
            by_message.setdefault(s.message, []).append(r)
    parts = [f"{ranks_text(rs)} failed in {PHASES[first]}: {msg}"
             for msg, rs in by_message.items()]
    text = f"segment '{name}': " + "; ".join(parts)
    later = sorted(r for r, s in failed.items() if PHASES.index(s.phase) != first)
    if later:
        text += f" (then {ranks_text(later)} failed in a later phase)"
    cause = failed[min(r for rs in by_message.values() for r in rs)]
    err = _KINDS[cause.kind](text)
    err.errno = cause.errno or errnos.EIO
    failures: Dict[int, Tuple[str, str]] = {r: (s.phase, s.message) for r, s in failed.items()}
    err.failures = failures
    return err
