"""What the ranks tell each other besides the blobs: one fixed-size record
per rank (did this rank get through its phase, and if not, why), so that a
failure on any rank becomes the same SharedSegmentError on every rank."""
import struct

from ._native import SharedSegmentError

RECORD_SIZE = 512
PHASES = ("setup", "create", "complete")
_MAGIC = b"sSgR"
_HEAD = struct.Struct("<4sBBxxi32s")  # magic, ok, phase, errno, host identity
_MESSAGE_MAX = RECORD_SIZE - _HEAD.size


class Status:
    __slots__ = ("ok", "phase", "errno", "message", "host_id")

    def __init__(self, ok=True, phase="setup", errno=0, message="", host_id=b""):
        self.ok, self.phase, self.errno = ok, phase, errno
        self.message, self.host_id = message, host_id

    @classmethod
    def failed(cls, phase, exc):
        return cls(False, phase, getattr(exc, "errno", 0) or 0, _describe(exc))

    def encode(self):
        text = self.message.encode("utf-8", "replace")[:_MESSAGE_MAX]
        head = _HEAD.pack(_MAGIC, int(self.ok), PHASES.index(self.phase), self.errno,
                          self.host_id)
        return head + text.ljust(_MESSAGE_MAX, b"\0")

    @classmethod
    def decode(cls, rank, raw):
        if len(raw) != RECORD_SIZE or raw[:4] != _MAGIC:
            raise SharedSegmentError(
                f"rank {rank}'s status record is {len(raw)} bytes starting {bytes(raw[:4])!r}: "
                f"the exchange returned something other than what rank {rank} sent")
        magic, ok, phase, errno, host_id = _HEAD.unpack_from(raw)
        message = raw[_HEAD.size:].rstrip(b"\0").decode("utf-8", "replace")
        return cls(bool(ok), PHASES[min(phase, len(PHASES) - 1)], errno, message, host_id)


def _describe(exc):
    """The sentence alone for the errors arguments make; the type for the rest."""
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    if isinstance(exc, (SharedSegmentError, ValueError, TypeError)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def gather(exchange, world_size, what, mine):
    """All-gathers mine (fixed length) and checks what came back."""
    try:
        got = exchange(mine)
    except Exception as e:
        raise SharedSegmentError(
            f"the all-gather of {what} over {exchange.what} failed: {_describe(e)}") from e
    if len(got) != world_size or any(len(g) != len(mine) for g in got):
        sizes = [len(g) for g in got]
        raise SharedSegmentError(
            f"the all-gather of {what} over {exchange.what} returned {len(got)} items of "
            f"{sizes} bytes; {world_size} items of {len(mine)} bytes expected")
    return [bytes(g) for g in got]


def agree(exchange, world_size, what, status):
    """Every rank's Status, in rank order."""
    got = gather(exchange, world_size, what, status.encode())
    return [Status.decode(r, raw) for r, raw in enumerate(got)]


def ranks_text(ranks):
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


def failure(name, statuses):
    """The SharedSegmentError every rank raises, or None when all succeeded.
    The earliest phase that failed is the cause; later failures follow it."""
    failed = {r: s for r, s in enumerate(statuses) if not s.ok}
    if not failed:
        return None
    first = min(PHASES.index(s.phase) for s in failed.values())
    by_message = {}
    for r, s in failed.items():
        if PHASES.index(s.phase) == first:
            by_message.setdefault(s.message, []).append(r)
    parts = [f"{ranks_text(rs)} failed in {PHASES[first]}: {msg}"
             for msg, rs in by_message.items()]
    text = f"segment '{name}': " + "; ".join(parts)
    later = sorted(r for r, s in failed.items() if PHASES.index(s.phase) != first)
    if later:
        text += f" (then {ranks_text(later)} failed in a later phase)"
    err = SharedSegmentError(text)
    err.errno = next(failed[r].errno for rs in by_message.values() for r in rs)
    err.failures = {r: (s.phase, s.message) for r, s in failed.items()}
    return err
