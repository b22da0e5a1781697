# SPDX-License-Identifier: Apache-2.0
"""Argument forms Python callers use (numbers, timedelta, environment
defaults) turned into what the C library takes. The words themselves (page
kinds, placements, sizes) are parsed by the C library, never here."""
import datetime
import math
from typing import Any, Dict, Optional, Tuple

from . import _native

U64_MAX = (1 << 64) - 1
# sseg_opts.timeout_ms is an int of milliseconds.
TIMEOUT_MAX_S = (2 ** 31 - 1) // 1000
DEFAULT_TIMEOUT_S = 30.0



def whole(value: Any, what: str, minimum: int = 1, maximum: int = U64_MAX) -> int:
    """An int (or anything with __index__, not bool) in minimum..maximum."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    value = value.__index__()
    if value < minimum:
        raise ValueError(f"{what} must be at least {minimum}, got {value}")
    if value > maximum:
        raise ValueError(f"{what}={value} is more than {maximum}"
                         + (" (2**64-1)" if maximum == U64_MAX else ""))
    return value


def timeout_seconds(timeout: Any) -> Tuple[float, str]:
    """(seconds, where from). None and 0 mean the default, 30 s, as
    timeout_ms=0 does in C; a number is seconds; a timedelta is what torch
    users pass. Negative, NaN, infinite or past C's int milliseconds is a
    ValueError."""
    if timeout is None:
        return DEFAULT_TIMEOUT_S, "default"
    if isinstance(timeout, datetime.timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be seconds (a number) or a datetime.timedelta, not "
                        f"{type(timeout).__name__}")
    else:
        seconds = float(timeout)
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"timeout={timeout!r}: must be 0 (the default, 30 s) or more")
    if seconds > TIMEOUT_MAX_S:
        raise ValueError(f"timeout={timeout!r}: at most {TIMEOUT_MAX_S} s (about 24 days; the "
                         f"C library counts int milliseconds)")
    if seconds == 0:
        return DEFAULT_TIMEOUT_S, "default (timeout=0)"
    return seconds, "argument"


def population_allowance(size: int, pages: int, populate: int) -> float:
    """Seconds the declared population may take (the library's
    sseg_population_allowance_ms, as the C tool takes it): added to every
    wait, so the owner's first touch of a large segment does not count
    against the peers' timeout. pages and populate as _native.parse gives
    them."""
    return _native.population_allowance_ms(size, pages, populate) / 1000.0


def setting(kind: str, value: Any) -> Tuple[str, str]:
    """(text, where from) for pages, numa and populate: the argument, else
    the operators' default as the library resolves it (SHAREDSEG_<KIND>,
    else its own: sseg_setting_default)."""
    if value is not None:
        return str(value), "argument"
    text, source = _native.setting_default(kind)
    return text, source


def parse(kind: str, text: str, source: str) -> Any:
    """The C library's parse of text; a ValueError names the variable when
    the text came from the environment."""
    try:
        return _native.parse(kind, text)
    except ValueError as e:
        if source.startswith("SHAREDSEG_"):
            raise ValueError(f"{source}={text!r}: {e}") from None
        raise


def describe_settings(settings: Dict[str, Tuple[Any, str]]) -> Dict[str, Dict[str, Any]]:
    return {k: {"value": v, "source": s} for k, (v, s) in settings.items()}


def size_bytes(size: Any) -> int:
    """size= as bytes: an int or a text with a binary unit ("256MiB")."""
    if size is None:
        return 0
    if isinstance(size, str):
        return _native.parse("size", size)
    return whole(size, "size", minimum=0)


def optional_index(value: Optional[Any], what: str, minimum: int = 0) -> Optional[int]:
    return None if value is None else whole(value, what, minimum=minimum,
                                            maximum=2 ** 31 - 1)
