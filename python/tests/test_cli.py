# SPDX-License-Identifier: Apache-2.0
"""`python -m sharedseg` and the wheel's `sharedseg` command: probe runs over
the extension and prints the C tool's JSON (one schema); demo, bench and
ls run the C tool when there is one, else say where it is."""
import json
import os
import subprocess
import sys

import sharedseg
from conftest import built, env_with_package


def c_tool():
    return built("sharedseg", "the C tool")


def cli(*argv, **env):
    return subprocess.run([sys.executable, "-m", "sharedseg", *argv], capture_output=True,
                          text=True, timeout=120, env=env_with_package(**env))


def shape(value):
    """The keys and value kinds of a JSON document, values left out."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value[:1]]
    return type(value).__name__ if value is not None else "null"


def test_probe_json_is_the_c_tools_and_the_functions():
    ours = cli("probe", "--json", "--size", "64MiB")
    assert ours.returncode == 0, ours.stderr
    theirs = subprocess.run([c_tool(), "probe", "--json", "--size", "64MiB"], capture_output=True,
                            text=True, timeout=60)
    mine, c = json.loads(ours.stdout), json.loads(theirs.stdout)
    assert mine["schema"] == c["schema"] == 1
    assert shape(mine) == shape(c)
    assert shape(sharedseg.probe("64MiB")) == shape(c)
    assert mine["auto"]["size"] == 64 << 20 and mine["kernel"] == c["kernel"]


def test_probe_text():
    done = cli("probe")
    assert done.returncode == 0, done.stderr
    assert "pages=auto for 1.0 GiB:" in done.stdout and "\nbackends\n" in done.stdout
    assert "  memfd   yes" in done.stdout


def test_bad_arguments_exit_2():
    assert cli("probe", "--size", "lots").returncode == 2
    assert cli("frobnicate").returncode == 2
    assert cli().returncode == 2
    version = cli("--version")
    assert version.returncode == 0 and sharedseg.__version__ in version.stdout


def test_c_commands_without_the_c_tool_say_where_it_is():
    done = cli("demo", PATH="/nonexistent")
    assert done.returncode == 2
    assert "make; then ./build/sharedseg demo" in done.stderr, done.stderr


def test_c_commands_run_the_c_tool():
    done = cli("demo", "--ranks", "2", "--size", "4MiB", "--pages", "base",
               SHAREDSEG_CLI=c_tool())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 private copies would use" in done.stdout, done.stdout


def test_ls_lists_a_live_segment_with_its_rank_and_pid():
    """list_segments() and `sharedseg ls` read /proc, as the C tool's ls:
    a segment this process maps is found, with this pid as rank 0."""
    seg = sharedseg.create_shared_segment("py-ls-live", size="4MiB", world_size=1,
                                          pages="base")
    try:
        mine = [s for s in sharedseg.list_segments() if s["name"] == "py-ls-live"]
        assert len(mine) == 1, mine
        s = mine[0]
        assert s["size"] == 4 << 20 and s["pages"] == "base" and s["world_size"] == 1
        assert s["owner_pid"] == os.getpid() and not s["unmapped"]
        assert [(p["pid"], p["rank"]) for p in s["processes"]] == [(os.getpid(), 0)]
        table = cli("ls")
        assert table.returncode == 0 and "py-ls-live  4.0 MiB, base pages" in table.stdout, \
            table.stdout
        assert f"pid {os.getpid():<8} rank 0" in table.stdout, table.stdout
        doc = json.loads(cli("ls", "--json").stdout)
        theirs = json.loads(subprocess.run([c_tool(), "ls", "--json"], capture_output=True,
                                           text=True, timeout=60).stdout)
        assert doc["schema"] == theirs["schema"] == 1
        assert [x for x in doc["segments"] if x["name"] == "py-ls-live"][0]["owner_pid"] == \
            os.getpid()
    finally:
        seg.close()
    assert not [s for s in sharedseg.list_segments() if s["name"] == "py-ls-live"]
    assert cli("ls", "--frob").returncode == 2


def test_ls_text_shows_a_driver_segment_whose_resident_bytes_are_unknown():
    """cuda and ascend segments come from tag pages: resident bytes null."""
    from sharedseg import cli

    seg = dict(name="kv", inode=None, backend="cuda", size=8 << 20, pages="auto",
               page_size=2 << 20, resident_bytes=None, numa_nodes=[], world_size=2,
               owner_rank=0, owner_pid=11, unmapped=False,
               processes=[dict(pid=11, uid=0, comm="engine", rank=0, mapped_bytes=8 << 20,
                               resident_bytes=None, holds_fd=False, readonly=False)])
    text = cli._ls_text([seg])
    assert "kv  8.0 MiB, auto pages, ? (cuda driver memory) resident" in text, text
    assert "mapped 8.0 MiB     resident ?" in text, text
