# SPDX-License-Identifier: Apache-2.0
"""The package's messages go to logging.getLogger("sharedseg"), each
starting with the logger's name ("sharedseg: ..."), so that it says where
it comes from also where logging's last resort prints the bare message
(no handler configured: warnings and errors go to stderr). The C
library's are among them: the extension queues them (its callback never
takes the GIL) and hands them over after each native call."""
import atexit
import logging
import os

from . import _native

logger = logging.getLogger("sharedseg")


class _Named(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"{self.logger.name}: {msg}", kwargs


def named(name: str = "sharedseg") -> logging.LoggerAdapter:
    """The logger `name` (the package's or one of its modules'), whose
    messages start with that name."""
    return _Named(logging.getLogger(name), {})


log = named()

_TO_LOGGING = {_native.LOG_ERROR: logging.ERROR, _native.LOG_WARN: logging.WARNING,
               _native.LOG_INFO: logging.INFO, _native.LOG_DEBUG: logging.DEBUG}


def _deliver(level: int, text: str) -> None:
    log.log(_TO_LOGGING.get(level, logging.WARNING), "%s", text)


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
