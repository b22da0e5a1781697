# SPDX-License-Identifier: Apache-2.0
"""list_segments() and `sharedseg ls` when another process names its memfd
to break them: a name that is not UTF-8 reads as U+FFFD instead of raising,
terminal escapes in a name show as text in the table, and `ls --json`, of
the C tool and of `python -m sharedseg`, stays one JSON document whose names
read back byte for byte."""
import json
import os
import subprocess
import sys

import pytest

import sharedseg
from conftest import built, env_with_package


def held(name: bytes) -> int:
    """A memfd of that name (any bytes), held by this process."""
    fd = os.memfd_create(os.fsdecode(name), 0)
    os.ftruncate(fd, 4096)
    return fd


def ls(*argv):
    return subprocess.run([sys.executable, "-m", "sharedseg", "ls", *argv], capture_output=True,
                          timeout=120, env=env_with_package())


def c_ls(*argv):
    return subprocess.run([built("sharedseg", "the C tool"), "ls", *argv], capture_output=True,
                          timeout=120)


# Names that break a writer or an indenter that mistakes where a string
# ends: quotes, backslashes, JSON punctuation, controls, UTF-8 both valid
# and not.
HOSTILE = [b'q"uote', b'x":y', b'q"a,b', b'a\\"{b', b'back\\slash', b'tail\\', b'"', b'nl\nx',
           b'tab\tx', b'cr\rx', b'ctl\x01\x1f\x7f\xc2\x85\x1b[2J',
           "utf-8 \u00fc \u2713 \U0001f600".encode(), b'bad\xff\xc0\xaf', b'cut\xe2\x80',
           b'surrogate\xed\xa0\x80']


def shown(name: bytes) -> str:
    """What the listing documents: each byte of an ill-formed UTF-8
    sequence reads as U+FFFD, everything else as it is."""
    out, i = [], 0
    while i < len(name):
        for n in (1, 2, 3, 4):
            try:
                out.append(name[i:i + n].decode("utf-8"))
                i += n
                break
            except UnicodeDecodeError:
                pass
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)


@pytest.mark.parametrize("run", [c_ls, ls], ids=["c_tool", "python_m"])
def test_ls_json_reads_back_every_hostile_name(run):
    tag = f"py-ls-json-{os.getpid()}-"
    names = [tag.encode() + b"%02d-" % i + n for i, n in enumerate(HOSTILE)]
    fds = [held(b"sseg:" + n) for n in names]
    try:
        out = run("--json")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout.decode("utf-8"))  # strict: one document, valid UTF-8
        ours = {s["name"]: s for s in doc["segments"] if s["name"].startswith(tag)}
        assert sorted(ours) == sorted(shown(n) for n in names), sorted(ours)
        for n in names:
            if shown(n).encode("utf-8") == n:  # valid UTF-8: byte for byte
                assert shown(n) in ours
        # The printed document says what Python's objects say (one document).
        theirs = {s["name"]: s for s in sharedseg.list_segments()
                  if s["name"].startswith(tag)}
        assert ours == theirs
    finally:
        for fd in fds:
            os.close(fd)


def test_a_name_that_is_not_utf8_is_listed_with_u_fffd():
    tail = f"py-ls-utf8-{os.getpid()}"
    fd = held(b"sseg:\xff\xc0" + tail.encode())
    try:
        names = [s["name"] for s in sharedseg.list_segments()]
        assert "\ufffd\ufffd" + tail in names, names
        text = ls("--json")
        assert text.returncode == 0, text.stderr
        doc = json.loads(text.stdout.decode("utf-8"))  # strict: valid UTF-8
        assert "\ufffd\ufffd" + tail in [s["name"] for s in doc["segments"]]
    finally:
        os.close(fd)


def test_the_table_shows_terminal_escapes_as_text():
    tail = f"py-ls-esc-{os.getpid()}"
    fd = held(b"sseg:" + tail.encode() + b"\x1b[2J\x1b[31mFAKE\xc2\x9b\xe2\x80\xae")
    try:
        table = ls()
        assert table.returncode == 0, table.stderr
        out = table.stdout.decode("utf-8")
        assert not [c for c in out if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) < 0xa0
                    or c == "\u202e"], out
        assert tail + "\\x1b[2J\\x1b[31mFAKE\\xc2\\x9b\\u202e" in out, out
    finally:
        os.close(fd)
