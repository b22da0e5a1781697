# SPDX-License-Identifier: Apache-2.0
"""A helper process driven one command at a time, for tests that order two
engines' steps themselves (barriers, not sleeps): commands go to its stdin,
each answer comes back as a JSON line on a pipe of its own (the engine's
logs, on stdout and stderr, are kept in TAG.log)."""
import json
import os
import select
import subprocess
import sys

from conftest import HELPERS, env_with_package, kill_group


def wait_s():
    """How long a helper may take to answer: $SSEG_TEST_ENGINE_WAIT_S, or
    420 s (many copies of a test at once on two cores start their engines
    slower than that)."""
    return float(os.environ.get("SSEG_TEST_ENGINE_WAIT_S", 420))


class Driven:
    """helpers/SCRIPT ARGS... RESULT_FD [MORE...] in a session of its own."""

    def __init__(self, tmp_path, tag, script, args, more=(), env=None):
        self.tag, self.log = tag, tmp_path / f"{tag}.log"
        r, w = os.pipe()
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, os.path.join(HELPERS, script)] + [str(a) for a in args] +
                [str(w)] + [str(m) for m in more],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, text=True,
                pass_fds=(w,), start_new_session=True, env=env_with_package(**(env or {})))
        os.close(w)
        self._fd, self._got = r, b""

    def said(self):
        return self.log.read_text()[-6000:]

    def next(self, op, timeout=None):
        """The helper's next answer, which must be op's."""
        timeout = timeout or wait_s()
        while b"\n" not in self._got:
            ready, _, _ = select.select([self._fd], [], [], timeout)
            assert ready, f"{self.tag} did not answer in {timeout} s:\n{self.said()}"
            more = os.read(self._fd, 1 << 16)
            assert more, f"{self.tag} exited ({self.proc.wait()}):\n{self.said()}"
            self._got += more
        line, self._got = self._got.split(b"\n", 1)
        got = json.loads(line)
        assert got["op"] == op, (got, self.said())
        return got

    def send(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def ask(self, command, op):
        self.send(command)
        return self.next(op)

    def quit(self):
        self.ask("quit", "quit")
        assert self.proc.wait(timeout=120) == 0, self.said()
        self.close()

    def failed(self):
        """The helper's exit, which must be a failure, and what it said."""
        assert self.proc.wait(timeout=wait_s()) != 0, self.said()
        self.close()
        return self.said()

    def kill(self):
        """SIGKILL to every process of it; back once the kernel has none
        of them left."""
        assert kill_group(self.proc.pid) == []
        self.proc.wait(timeout=60)
        self.close()

    def close(self):
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self.proc.stdin.close()

    def end(self):
        """Whatever state it is in: gone."""
        if self.proc.poll() is None:
            kill_group(self.proc.pid)
        self.close()
