#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How `sharedseg ls` scales against a hostile local user: HOLDERS processes
of uid 65534 each hold MEMFDS/HOLDERS memfds named like segments, and root's
`ls --json` (and the table) is timed with /usr/bin/time -v: wall time and
peak RSS. Not a ctest (minutes before the fix); run it by hand as root:

    python3 tests/scale/ls_scale.py build/sharedseg [--memfds 64000] [--holders 4]
        [--names plain|long]

--names long gives each memfd a 249-byte name of invalid UTF-8 bytes, the
largest document an attacker can make per memfd. A holder may hold at most
the hard RLIMIT_NOFILE this shell has: past it, add holders."""
import argparse
import ctypes
import json
import os
import re
import resource
import subprocess
import sys

NOBODY = 65534


def hold(count, first, names, ready_w, release_r):
    """A child: becomes nobody, holds count memfds, waits for release."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (count + 64, count + 64))
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: as a login process is
    fds = []
    for i in range(first, first + count):
        if names == "long":
            name = b"sseg:" + b"\xff" * 236 + b"%08d" % i
        else:
            name = b"sseg:hostile-%d" % i
        fds.append(os.memfd_create(os.fsdecode(name), 0))
    os.write(ready_w, b"r")
    os.read(release_r, 1)
    os._exit(0)


def measure(cli, args):
    done = subprocess.run(["/usr/bin/time", "-v", cli, "ls"] + args, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, errors="replace")
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", done.stderr).group(1)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    parts = [float(p) for p in wall.split(":")]
    seconds = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    if "--json" in args:
        doc = json.loads(done.stdout)
        listed = f"{len(doc['segments'])} segments listed, truncated {doc.get('truncated')}"
    else:
        listed = "truncated" if "(truncated: " in done.stdout else "not truncated"
    return done.returncode, seconds, rss, len(done.stdout), listed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("--memfds", type=int, default=64000)
    ap.add_argument("--holders", type=int, default=4)
    ap.add_argument("--names", choices=["plain", "long"], default="plain")
    ap.add_argument("--table", action="store_true", help="time the table too")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("ls_scale: needs root (its holders become uid 65534)", file=sys.stderr)
        return 77
    ready_r, ready_w = os.pipe()
    release_r, release_w = os.pipe()
    each = a.memfds // a.holders
    pids = []
    for h in range(a.holders):
        pid = os.fork()
        if pid == 0:
            os.close(ready_r)
            os.close(release_w)
            hold(each, h * each, a.names, ready_w, release_r)
        pids.append(pid)
    os.close(ready_w)
    os.close(release_r)
    for _ in pids:
        if os.read(ready_r, 1) != b"r":
            print("ls_scale: a holder died", file=sys.stderr)
            return 1
    try:
        runs = [("ls --json", ["--json"])] + ([("ls", [])] if a.table else [])
        for label, args in runs:
            rc, seconds, rss, out, listed = measure(a.cli, args)
            print(f"{label}: {each * a.holders} memfds ({a.names} names) held by "
                  f"{a.holders} processes of uid {NOBODY}: rc {rc}, {seconds:.2f} s, "
                  f"peak RSS {rss / 1024:.1f} MiB, {out / 2**20:.1f} MiB of output, "
                  f"{listed}")
    finally:
        os.close(release_w)
        for pid in pids:
            os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
