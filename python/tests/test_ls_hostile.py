# SPDX-License-Identifier: Apache-2.0
"""list_segments() and the `sharedseg ls` table when another process names
its memfd to break them: a name that is not UTF-8 reads as U+FFFD instead
of raising, and terminal escapes in a name show as text."""
import json
import os
import subprocess
import sys

import sharedseg
from conftest import env_with_package


def held(name: bytes) -> int:
    """A memfd of that name (any bytes), held by this process."""
    fd = os.memfd_create(os.fsdecode(name), 0)
    os.ftruncate(fd, 4096)
    return fd


def ls(*argv):
    return subprocess.run([sys.executable, "-m", "sharedseg", "ls", *argv], capture_output=True,
                          timeout=120, env=env_with_package())


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
        assert tail + "\\x1b[2J\\x1b[31mFAKE\\x9b\\u202e" in out, out
    finally:
        os.close(fd)
