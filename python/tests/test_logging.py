# SPDX-License-Identifier: Apache-2.0
"""The C library's messages reach logging.getLogger("sharedseg") (queued by
a callback that never takes the GIL, handed over after each call), the
queue is bounded and counts what it dropped, SHAREDSEG_LOG=off silences it, and
nothing is written to stderr behind logging's back."""
import json
import logging
import subprocess
import sys

from conftest import env_with_package

import sharedseg
from sharedseg import _native, create_shared_segment

KV = {"k": dict(count=2, shape=(4, 8), dtype="float32")}


def test_library_messages_go_to_the_sharedseg_logger(caplog):
    caplog.set_level(logging.DEBUG, logger="sharedseg")
    with create_shared_segment("py-log", KV, pages="base"):
        pass
    mine = [r for r in caplog.records if r.name == "sharedseg"]
    assert mine, "the library said nothing at debug level"
    assert all(r.levelno in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR)
               for r in mine)
    assert _native.log_level() == _native.LOG_DEBUG


def test_the_library_follows_the_loggers_level(caplog):
    caplog.set_level(logging.ERROR, logger="sharedseg")
    with create_shared_segment("py-log-quiet", KV, pages="base"):
        pass
    assert _native.log_level() == _native.LOG_ERROR
    assert not [r for r in caplog.records if r.name == "sharedseg" and r.levelno < logging.ERROR]


def test_the_queue_is_bounded_and_counts_what_it_dropped(caplog):
    caplog.set_level(logging.DEBUG, logger="sharedseg")
    _native.drain_log()
    caplog.clear()
    _native._queue_log(_native.LOG_WARN, "queued line", 300)
    _native.drain_log()
    lines = [r.getMessage() for r in caplog.records if r.name == "sharedseg"]
    assert lines[0] == ("sharedseg: 44 library message(s) were dropped: more than 256 were "
                        "queued between two calls into sharedseg"), lines[0]
    assert lines[1:] == ["sharedseg: queued line"] * 256
    assert caplog.records[1].levelno == logging.WARNING


SCRIPT = '''
import logging, sys
import sharedseg
logging.basicConfig(stream=sys.stdout, level=logging.DEBUG, format="%(name)s:%(levelname)s:%(message)s")
with sharedseg.create_shared_segment("py-log-sub", {"k": (1, (4,), "f32")}, pages="base"):
    pass
print("done")
'''


def run(env_extra):
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env_with_package(**env_extra),
                          capture_output=True, text=True, timeout=60)


def test_messages_go_through_logging_not_stderr():
    done = run({})
    assert done.returncode == 0, done.stderr
    assert "sharedseg:DEBUG:" in done.stdout and done.stdout.strip().endswith("done")
    assert done.stderr == "", done.stderr


# No logging configured: logging's last resort prints a warning's bare
# message on stderr, which must still say whose it is.
UNCONFIGURED = '''
import sys
import sharedseg
from sharedseg import _native
pages = sys.argv[1]
_native._queue_log(_native.LOG_WARN, "a queued warning", 1)
for size in (1 << 20, 4 << 20):
    print(size, sharedseg.probe(size)["auto"]["pages"], file=sys.stderr, flush=True)
    with sharedseg.create_shared_segment("py-log-fall", size=size, pages=pages, populate="lazy"):
        pass
'''


def unconfigured(pages):
    done = subprocess.run([sys.executable, "-c", UNCONFIGURED, pages], env=env_with_package(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()


def test_unconfigured_messages_name_the_package_and_small_segments_do_not_warn():
    """The fall-back warning says 'sharedseg', and only for a segment of a
    huge page or more: 1 MiB on base pages lost nothing to say."""
    lines = unconfigured("auto")
    assert lines[0] == "sharedseg: a queued warning", lines
    assert lines[1].startswith("1048576 "), lines
    assert lines[2].startswith("4194304 "), lines  # nothing said for the 1 MiB segment
    if lines[2] == "4194304 base":  # the knobs of this host leave pages=auto base pages
        assert len(lines) == 4 and lines[3].startswith(
            "sharedseg: pages=auto fell back to 4 KiB pages: base pages: "), lines
    else:
        assert len(lines) == 3, lines
    assert unconfigured("base")[1:] == [lines[1], lines[2]]


def test_sharedseg_log_off_silences_the_library():
    done = run({"SHAREDSEG_LOG": "off"})
    assert done.returncode == 0, done.stderr
    assert "sharedseg:" not in done.stdout and done.stderr == "", done.stdout + done.stderr


def test_the_old_sseg_log_is_still_read_and_told_once():
    done = run({"SSEG_LOG": "off"})
    assert done.returncode == 0, done.stderr
    assert "sharedseg:" not in done.stdout and done.stderr == "", done.stdout + done.stderr
    done = run({"SSEG_LOG": "debug"})
    assert done.returncode == 0, done.stderr
    told = [line for line in done.stdout.splitlines() if "deprecated" in line]
    assert told == ["sharedseg:WARNING:sharedseg: SSEG_LOG is deprecated: set SHAREDSEG_LOG instead "
                    "(which wins where both are set)"], done.stdout
    assert "sharedseg:DEBUG:" in done.stdout
    assert done.stderr == "", done.stderr


def test_the_new_name_wins_over_the_old_one():
    done = run({"SHAREDSEG_LOG": "off", "SSEG_LOG": "debug"})
    assert done.returncode == 0, done.stderr
    assert "sharedseg:" not in done.stdout and done.stderr == "", done.stdout + done.stderr


def test_probe_and_supported_drain_too(caplog):
    caplog.set_level(logging.DEBUG, logger="sharedseg")
    _native._queue_log(_native.LOG_INFO, "before probe", 1)
    sharedseg.probe()
    assert "sharedseg: before probe" in [r.getMessage() for r in caplog.records]


# Thread A runs `probe` in the process; it blocks writing its output to a
# full pipe (its messages are written by then). Meanwhile the main thread
# makes the library say one line per call; each must reach logging, and
# none of the command's own lines.
BESIDE_A_COMMAND = '''
import fcntl, json, logging, os, select, sys, threading
import sharedseg
from sharedseg import _native, cli
seen = []
class Keep(logging.Handler):
    def emit(self, record):
        seen.append(record.getMessage())
logger = logging.getLogger("sharedseg")
logger.addHandler(Keep()); logger.setLevel(logging.DEBUG); logger.propagate = False
_native.set_log_level(_native.LOG_DEBUG)
r, w = os.pipe()
fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ: one page
os.set_blocking(w, False)
try:
    while True:
        os.write(w, b"x" * 512)
except BlockingIOError:
    os.set_blocking(w, True)
saved = os.dup(1)
os.dup2(w, 1)
rc = []
command = threading.Thread(target=lambda: rc.append(cli.main(["probe"])))
command.start()
wchan = f"/proc/self/task/{command.native_id}/wchan"
while "pipe_write" not in open(wchan).read():  # the command is writing its output
    assert command.is_alive()
for i in range(200):
    try:
        _native.parse("size", f"bogus-{i}")
    except ValueError:
        pass
while command.is_alive():
    if select.select([r], [], [], 0.05)[0]:
        os.read(r, 65536)
command.join()
os.dup2(saved, 1)
_native.drain_log()
print(json.dumps(dict(rc=rc, seen=seen)))
'''


def test_a_command_on_one_thread_leaves_the_other_threads_messages_to_logging():
    done = subprocess.run([sys.executable, "-c", BESIDE_A_COMMAND], capture_output=True,
                          text=True, timeout=120, env=env_with_package())
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["rc"] == [0]
    wanted = [f"sharedseg: error -22: size 'bogus-{i}' is not a number with an optional unit (K, M, G, T, "
              f"P, E, with or without iB)" for i in range(200)]
    assert got["seen"] == wanted, got["seen"][:3]
    # The command's own lines (what probe says at debug level on this host)
    # are the C tool's, on stderr.
    assert all(line.startswith("sharedseg[") and ": debug: " in line
               for line in done.stderr.splitlines()), done.stderr
    assert "bogus" not in done.stderr
