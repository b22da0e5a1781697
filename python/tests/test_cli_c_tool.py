# SPDX-License-Identifier: Apache-2.0
"""`python -m sharedseg` for the commands only the C tool runs (demo, bench,
keep): where it looks for the C tool (never in the working directory, what
PATH's empty entries and an unset PATH would make of it in a shell), the
sentence it says when it finds none, true for each of them, and what a
user typed or set shown escaped in its messages, as the C tool shows
what others chose (its ls table)."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import built, env_with_package
from sharedseg import _native, cli
from sharedseg._visible import visible

C_ONLY = ("demo", "bench", "keep")


def no_c_tool_but_the_decoys():
    """The checkout's package carries no C tool, and os.defpath's folders
    (what an unset PATH searches) hold none: a run that finds one found a
    decoy."""
    own = os.path.join(os.path.dirname(cli.__file__), "_tool", "sharedseg")
    assert not os.path.exists(own), f"{own} exists: these tests need the checkout's package"
    for folder in os.defpath.split(os.pathsep):
        assert not os.path.exists(os.path.join(folder or ".", "sharedseg")), \
            f"a sharedseg in {folder!r} (os.defpath) would be the C tool these tests expect none"


def python_command(argv, cwd, path, **extra):
    """`python -m sharedseg ARGV` from cwd, PATH as given (None: unset)."""
    env = env_with_package()
    env.pop("SHAREDSEG_CLI", None)
    env.pop("PATH", None)
    if path is not None:
        env["PATH"] = path
    env.update(extra)
    return subprocess.run([sys.executable, "-m", "sharedseg", *argv], cwd=cwd, env=env,
                          capture_output=True, timeout=120)


def not_found(command):
    return (f"sharedseg {command}: this command runs only in the C tool, not inside the "
            f"Python interpreter, and no C tool was found (in the wheel, in a folder of PATH, "
            f"or named by SHAREDSEG_CLI). Build it with CMake (make; then ./build/sharedseg "
            f"{command}) or install it (make install).\n").encode()


@pytest.mark.parametrize("path", [None, "", ":", "/nonexistent::/nonexistent-too",
                                  "/nonexistent:"], ids=["unset", "empty", "colon",
                                                         "empty-entry", "trailing-colon"])
def test_a_program_of_the_working_directory_is_never_run(tmp_path, path):
    """A shell reads an empty PATH entry as the current directory; the C
    tool is never looked for there. The decoy is an ELF program that prints
    what it was given."""
    no_c_tool_but_the_decoys()
    shutil.copy("/bin/echo", tmp_path / "sharedseg")
    done = python_command(["demo", "--ranks", "2"], tmp_path, path)
    assert (done.returncode, done.stdout, done.stderr) == (2, b"", not_found("demo"))


def test_an_unset_path_is_the_default_search_path(tmp_path, monkeypatch):
    """os.defpath, less an empty entry (old Pythons' began with one), from
    a working directory that holds a decoy."""
    folder = tmp_path / "bin"
    folder.mkdir()
    shutil.copy(built("sharedseg", "the C tool"), folder / "sharedseg")
    shutil.copy("/bin/echo", tmp_path / "sharedseg")
    monkeypatch.delenv("SHAREDSEG_CLI", raising=False)
    monkeypatch.delenv("PATH")
    monkeypatch.setattr(os, "defpath", f":{folder}")
    monkeypatch.chdir(tmp_path)
    assert cli.path_folders() == [str(folder)]
    assert cli.c_tool() == str(folder / "sharedseg")


def test_a_folder_of_path_holds_the_c_tool_it_runs(tmp_path):
    no_c_tool_but_the_decoys()
    folder = tmp_path / "bin"
    folder.mkdir()
    os.symlink(built("sharedseg", "the C tool"), folder / "sharedseg")
    done = python_command(["demo", "--ranks", "2", "--size", "4MiB", "--pages", "base"],
                          tmp_path, f"/nonexistent::{folder}")
    assert done.returncode == 0, done.stderr
    assert b"2 private copies would use" in done.stdout, done.stdout


@pytest.mark.parametrize("command", C_ONLY)
def test_without_the_c_tool_each_command_says_why_in_a_true_sentence(tmp_path, command):
    """keep forks no ranks: the sentence names what is true of each
    command the C tool alone runs."""
    assert _native.cli_c_tool_only(command)
    done = python_command([command, "--help"], tmp_path, "/nonexistent")
    assert (done.returncode, done.stdout, done.stderr) == (2, b"", not_found(command))


# What users type or set, in the bytes a terminal would act on: an escape
# sequence, a character that reverses the line, a backslash, bytes that are
# not UTF-8, a C1 control.
HOSTILE = b"tool\x1b[31mRED\xe2\x80\xae\\x\xff\xc2\x9b"
SHOWN = "tool\\x1b[31mRED\\u202e\\\\x\\xff\\xc2\\x9b"


def test_visible_is_the_c_tools_convention():
    assert visible(os.fsdecode(HOSTILE)) == SHOWN
    assert visible("tab\there\nnl\x7f\u2066ok \u00fc\u2713") == \
        "tab\\x09here\\x0anl\\x7f\\u2066ok \u00fc\u2713"


def test_the_c_tools_table_escapes_a_name_as_visible_does(tmp_path):
    """A memfd name through the C tool's ls table and through visible():
    the same text, for the characters the listing keeps as they are (its
    JSON makes bytes that are not UTF-8 U+FFFD and a C1 control one byte)."""
    tail = f"py-visible-{os.getpid()}"
    name = tail + "\x1b[2J\x01\x7f\t\u202e\u2066back\\slash"
    fd = os.memfd_create("sseg:" + name, 0)
    try:
        os.ftruncate(fd, 4096)
        table = subprocess.run([built("sharedseg", "the C tool"), "ls"], capture_output=True,
                               timeout=120)
    finally:
        os.close(fd)
    assert table.returncode == 0, table.stderr
    lines = [line for line in table.stdout.decode().splitlines() if line.startswith(tail)]
    assert len(lines) == 1 and lines[0].startswith(visible(name) + "  "), lines


def test_shared_seg_cli_naming_no_program_is_said_escaped(tmp_path):
    named = os.fsdecode(bytes(tmp_path) + b"/" + HOSTILE)
    done = python_command(["demo"], tmp_path, "/nonexistent", SHAREDSEG_CLI=named)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == (
        f"sharedseg demo: SHAREDSEG_CLI='{tmp_path}/{SHOWN}' is not the C tool (an executable "
        f"ELF program): name the C tool there (./build/sharedseg after make), or unset "
        f"SHAREDSEG_CLI\n")


def test_a_c_tool_that_cannot_run_is_said_escaped_without_a_traceback(tmp_path):
    """An ELF header over nothing runnable (another machine's build cut
    short): exec fails, and the command says so in one sentence."""
    tool = bytes(tmp_path) + b"/" + HOSTILE
    with open(tool, "wb") as f:
        f.write(b"\x7fELF" + b"\0" * 60)
    os.chmod(tool, 0o755)
    done = python_command(["bench"], tmp_path, "/nonexistent", SHAREDSEG_CLI=os.fsdecode(tool))
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode() == \
        f"sharedseg bench: cannot run the C tool '{tmp_path}/{SHOWN}': Exec format error\n"

