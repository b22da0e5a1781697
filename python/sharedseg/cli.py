# SPDX-License-Identifier: Apache-2.0
"""The wheel's `sharedseg` command (and `python -m sharedseg`): the C tool's
command line, compiled into the extension and run in this process
(_native.cli), so help, probe and ls print what the C tool prints. demo and
bench fork processes that run the library, which is not safe inside an
interpreter (its threads, its signal handlers, a GPU driver it may have
initialised), and keep serves until a signal stops it: those run the C
tool, the one the wheel carries (sharedseg/_tool/sharedseg) unless
SHAREDSEG_CLI names another, else the first in PATH's folders (a
checkout's `make python` has no copy of its own)."""
import os
import sys
from typing import List, Optional

from . import _native
from ._visible import quoted


def _is_program(path: str) -> bool:
    """An ELF executable: the C tool, not a script like this one's launcher."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF" and os.access(path, os.X_OK)
    except OSError:
        return False


def path_folders() -> List[str]:
    """The folders PATH names, in order. An empty entry is left out, never
    the current directory: a program of whatever folder one runs from is not
    the C tool. PATH unset is os.defpath, the shell's fallback; PATH set
    but empty names none."""
    path = os.environ.get("PATH")
    return [folder for folder in (os.defpath if path is None else path).split(os.pathsep)
            if folder]


def c_tool() -> Optional[str]:
    """The C tool: SHAREDSEG_CLI, else the wheel's own, else the first
    `sharedseg` program in PATH's folders."""
    named = os.environ.get("SHAREDSEG_CLI")
    if named:
        return named if _is_program(named) else None
    own = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_tool", "sharedseg")
    if _is_program(own):
        return own
    for folder in path_folders():
        path = os.path.join(folder, "sharedseg")
        if _is_program(path):
            return path
    return None


def _not_found(command: str) -> str:
    named = os.environ.get("SHAREDSEG_CLI")
    if named:
        return (f"sharedseg {command}: SHAREDSEG_CLI={quoted(named)} is not the C tool (an "
                f"executable ELF program): name the C tool there (./build/sharedseg after "
                f"make), or unset SHAREDSEG_CLI")
    return (f"sharedseg {command}: this command runs only in the C tool, not inside the "
            f"Python interpreter, and no C tool was found (in the wheel, in a folder of PATH, "
            f"or named by SHAREDSEG_CLI). Build it with CMake (make; then ./build/sharedseg "
            f"{command}) or install it (make install).")


def _run_c_tool(argv: List[str]) -> int:
    tool = c_tool()
    if tool is None:
        print(_not_found(argv[0]), file=sys.stderr)
        return 2
    _flush_python_streams()
    try:
        os.execv(tool, [tool] + argv)
    except OSError as e:
        print(f"sharedseg {argv[0]}: cannot run the C tool {quoted(tool)}: {e.strerror}",
              file=sys.stderr)
    return 1


def _flush_python_streams() -> None:
    """What Python holds goes out before the C code writes to the same
    descriptors. A stream that is closed (None: the descriptor was closed
    at startup) or refuses is the C code's to report: it writes the same
    descriptor, checks its output at the end and fails with a sentence."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


def main(argv: Optional[List[str]] = None) -> int:
    # The bytes the C tool would get: an argument that is not UTF-8 too.
    argv = [os.fsencode(a) for a in (sys.argv[1:] if argv is None else argv)]
    if argv and _native.cli_c_tool_only(argv[0]):
        return _run_c_tool([os.fsdecode(a) for a in argv])
    _flush_python_streams()
    return _native.cli(argv)


if __name__ == "__main__":
    sys.exit(main())
