# SPDX-License-Identifier: Apache-2.0
"""The wheel's `sharedseg` command (and `python -m sharedseg`). probe and ls
run here, over the extension, from the same library calls as the C tool's;
demo and bench belong to the C tool, which this runs when one is installed
(on PATH, or SHAREDSEG_CLI)."""
import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional

from . import __version__, _native

USAGE = """usage: sharedseg COMMAND [OPTIONS]

commands:
  probe   what this host can do: memfd, THP, HugeTLB pools, NUMA, backends
  demo    N processes map one segment (the C tool's)
  bench   population rate, attach time, read bandwidth (the C tool's)
  ls      live segments on this host: who maps them, how much is resident

This is the Python package's front end: probe and ls run here; demo and
bench run the C tool `sharedseg` (built by CMake: make, then ./build/sharedseg)
when one is on PATH or named by SHAREDSEG_CLI.
Exit status: 0 success, 1 a failure, 2 a bad argument or a command this
installation does not have.
"""


def _resident(s: Dict[str, Any]) -> str:
    """A segment's resident bytes; a driver's memory (null) as the C tool
    says it."""
    if s["resident_bytes"] is None:
        return f"? ({_visible(s['backend'])} driver memory)"
    return _gib(s["resident_bytes"])


def _gib(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


def _probe_text(facts: Dict[str, Any]) -> str:
    thp = facts["thp"]
    lines = ["host",
             f"  kernel           {facts['kernel']}",
             f"  memfd            {'yes' if facts['memfd'] else 'no'}, sealing "
             f"{'yes' if facts['sealing'] else 'no'}",
             f"  memfd HugeTLB    {'yes' if facts['memfd_hugetlb'] else 'no'}",
             f"  THP for shmem    shmem_enabled={thp['shmem_enabled']}, 2 MiB "
             f"shmem_enabled={thp['shmem_2m_enabled'] or '-'}: "
             f"{'usable' if thp['usable'] else 'not usable'}"]
    for pool in facts["hugetlb_pools"]:
        lines.append(f"  HugeTLB {_gib(pool['page_size']):8} {pool['total']} total, "
                     f"{pool['free']} free, {pool['reserved']} reserved")
    nodes = facts["numa"]["nodes"]
    lines.append(f"  NUMA nodes       {len(nodes)} with memory: {', '.join(map(str, nodes))}")
    auto = facts["auto"]
    lines += ["", f"pages=auto for {_gib(auto['size'])}: {auto['pages']}",
              f"  because {auto['reason']}", "", "backends"]
    for name, b in facts["backends"].items():
        lines.append(f"  {name:7} {'yes' if b['available'] else 'no ':4} {b['reason']}")
    if facts["advice"]:
        lines += ["", "advice:"] + [f"  - {a}" for a in facts["advice"]]
    return "\n".join(lines)


def _probe(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="sharedseg probe",
        description="What this host offers a shared segment (changes nothing). --json prints "
                    "the object sharedseg.probe() returns; its \"schema\" field is its version.")
    ap.add_argument("--size", default="1GiB",
                    help="segment size pages=auto is decided for (default 1GiB)")
    ap.add_argument("--json", action="store_true", help="one JSON object")
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    try:
        size = _native.parse("size", a.size)
    except ValueError as e:
        print(f"sharedseg probe: --size {a.size}: {e}", file=sys.stderr)
        return 2
    text = _native.probe_json(size)
    print(text if a.json else _probe_text(json.loads(text)))
    return 0


# Characters that reorder or break the line a terminal shows.
_BIDI = frozenset([0x061c, 0x200e, 0x200f, *range(0x2028, 0x202f), *range(0x2066, 0x206a)])


def _visible(text: str) -> str:
    """text for a terminal: other users choose names and commands, so every
    control shows as an escape (\\x1b, \\u202e) and a backslash as \\\\, as the
    C tool's table shows them."""
    out = []
    for ch in text:
        c = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif c < 0x20 or 0x7f <= c < 0xa0:
            out.append(f"\\x{c:02x}")
        elif c in _BIDI or 0xd800 <= c < 0xe000:
            out.append(f"\\u{c:04x}")
        else:
            out.append(ch)
    return "".join(out)


def _ls_text(segments: List[Dict[str, Any]], truncated: bool = False) -> str:
    if not segments:
        return "no sharedseg segment is live on this host (that this user can see)"
    lines = []
    for s in segments:
        owner = (f"owner rank {s['owner_rank']} pid {s['owner_pid']}"
                 if s["owner_pid"] is not None else "owner gone or unknown")
        lines.append(f"{_visible(s['name'])}  {_gib(s['size'])}, {_visible(s['pages'])} pages, "
                     f"{_resident(s)} resident, nodes "
                     f"{','.join(map(str, s['numa_nodes'])) or '?'}, {owner}"
                     f"{', UNMAPPED (held by a descriptor only)' if s['unmapped'] else ''}")
        for p in s["processes"]:
            rank = "?" if p["rank"] is None else p["rank"]
            lines.append(f"    pid {p['pid']:<8} rank {rank!s:<4} {_visible(p['comm']):<16} mapped "
                         f"{_gib(p['mapped_bytes']):<11} resident {'?' if p['resident_bytes'] is None else _gib(p['resident_bytes'])}"
                         f"{' holds fd' if p['holds_fd'] else ''}"
                         f"{' read-only' if p['readonly'] else ''}")
    if truncated:
        lines.append("(truncated: this host has more segments or holdings than one listing "
                     "holds; the rest are left out)")
    return "\n".join(lines)


def _ls(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="sharedseg ls",
        description="Every segment live on this host (root: every user's), from /proc: who "
                    "maps it, with which rank, how much is resident. --json prints what "
                    "sharedseg.list_segments() returns, inside {\"schema\", \"segments\"}.")
    ap.add_argument("--json", action="store_true", help="one JSON object")
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    text = _native.list_json()
    if a.json:
        print(text)
    else:
        doc = json.loads(text)
        print(_ls_text(doc["segments"], doc.get("truncated", False)))
    return 0


def _is_program(path: str) -> bool:
    """An ELF executable: the C tool, not a script like this one's launcher."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF" and os.access(path, os.X_OK)
    except OSError:
        return False


def c_tool() -> Optional[str]:
    """The C tool: SHAREDSEG_CLI, else the first `sharedseg` program on PATH."""
    named = os.environ.get("SHAREDSEG_CLI")
    if named:
        return named if _is_program(named) else None
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(folder or ".", "sharedseg")
        if _is_program(path):
            return path
    return None


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"sharedseg {__version__} (library {_native.LIBRARY_VERSION}, Python package)")
        return 0
    if argv[0] == "probe":
        return _probe(argv[1:])
    if argv[0] == "ls":
        return _ls(argv[1:])
    if argv[0] in ("demo", "bench"):
        tool = c_tool()
        if tool is None:
            print(f"sharedseg {argv[0]}: this is the C tool's command, and no C tool was found "
                  f"(on PATH, or SHAREDSEG_CLI). Build it with CMake (make; then "
                  f"./build/sharedseg {argv[0]}) or install it (make install).",
                  file=sys.stderr)
            return 2
        sys.stdout.flush()
        os.execv(tool, [tool] + argv)
    print(f"sharedseg: unknown command '{argv[0]}'\n\n{USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
