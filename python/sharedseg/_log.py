# SPDX-License-Identifier: Apache-2.0
"""The C library's messages go to logging.getLogger("sharedseg"): the
extension queues them (its callback never takes the GIL) and hands them
over after each native call. With no handler configured, logging's last
resort still prints warnings and errors to stderr, once each."""
import atexit
import logging
import os

from . import _native

logger = logging.getLogger("sharedseg")

_TO_LOGGING = {_native.LOG_ERROR: logging.ERROR, _native.LOG_WARN: logging.WARNING,
               _native.LOG_INFO: logging.INFO, _native.LOG_DEBUG: logging.DEBUG}


def _deliver(level: int, text: str) -> None:
    logger.log(_TO_LOGGING.get(level, logging.WARNING), "%s", text)


def sync_level() -> None:
    """The library delivers what the logger would show: its level follows
    the logger's, unless SHAREDSEG_LOG (off, error, warn, info, debug) set
    it. The library also reads SSEG_LOG, the name of 0.2 and before, and
    says once through this logger that it is deprecated."""
    if os.environ.get("SHAREDSEG_LOG") or os.environ.get("SSEG_LOG"):
        return
    level = logger.getEffectiveLevel()
    if level <= logging.DEBUG:
        native = _native.LOG_DEBUG
    elif level <= logging.INFO:
        native = _native.LOG_INFO
    elif level <= logging.WARNING:
        native = _native.LOG_WARN
    elif level <= logging.ERROR:
        native = _native.LOG_ERROR
    else:
        native = _native.LOG_OFF
    _native.set_log_level(native)


def install() -> None:
    _native.set_log_sink(_deliver)
    # Lines queued by the library's own threads after the last call.
    atexit.register(_native.drain_log)
