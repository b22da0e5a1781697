# SPDX-License-Identifier: Apache-2.0
"""`python -m sharedseg` and the wheel's `sharedseg` command run the C
tool's command line inside the interpreter (_native.cli): help, probe and
ls print what the C tool prints, byte for byte, with its exit codes. demo
and bench fork their ranks, so they run the C tool when there is one, else
say where it is."""
import json
import os
import pwd
import re
import subprocess
import sys

import pytest

import sharedseg
from conftest import built, env_with_package
from sharedseg import _native


def c_tool():
    return built("sharedseg", "the C tool")


def cli(*argv, **env):
    return subprocess.run([sys.executable, "-m", "sharedseg", *argv], capture_output=True,
                          text=True, timeout=120, env=env_with_package(**env))


def tool(*argv):
    return subprocess.run([c_tool(), *argv], capture_output=True, text=True, timeout=120)


def both(*argv):
    """The Python command's run and the C tool's, of the same arguments."""
    return cli(*argv), tool(*argv)


@pytest.mark.parametrize("argv", [[], ["--help"], ["--version"], ["help"], ["help", "ls"],
                                  ["help", "nope"], ["frobnicate"], ["probe", "--help"],
                                  ["probe", "--size", "lots"], ["probe", "--frob"],
                                  ["ls", "--help"], ["ls", "--frob"], ["ls", "stray"],
                                  ["probe", "--size", "\x1b[2J"], ["\x1b[2J"], ["probe", "\x1b"],
                                  ["help", "\u202e"], ["probe", "--\x1b=1"]])
def test_help_and_errors_are_the_c_tools(argv):
    ours, theirs = both(*argv)
    assert (ours.returncode, ours.stdout, ours.stderr) == \
        (theirs.returncode, theirs.stdout, theirs.stderr)
    # What the user typed is shown escaped, never the bytes a terminal acts on.
    assert "\x1b" not in theirs.stderr and "\u202e" not in theirs.stderr


def test_version_and_bad_arguments_exit_codes():
    assert cli("probe", "--size", "lots").returncode == 2
    assert cli("frobnicate").returncode == 2
    assert cli().returncode == 2
    version = cli("--version")
    assert version.returncode == 0 and sharedseg.__version__ in version.stdout


def numbers_masked(value):
    """A parsed document with every number 0: the host's free pages and
    memory move between two probes; names, strings and shape do not."""
    if isinstance(value, dict):
        return {k: numbers_masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [numbers_masked(v) for v in value]
    return 0 if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def test_probe_json_is_the_document_python_gets():
    """What `probe --json` prints (the helper library's document, indented)
    reads as the object sharedseg.probe() gives, key for key and string for
    string: one document, written once."""
    for out in both("probe", "--json", "--size", "64MiB"):
        assert out.returncode == 0, out.stderr
        printed = json.loads(out.stdout)
        assert numbers_masked(printed) == numbers_masked(sharedseg.probe(64 << 20))
        assert out.stdout.startswith('{\n  "schema": 1,\n')


def counts_masked(text):
    """The host's free pages and memory move while a test runs; every number
    reads N, so what is compared is the wording and the layout."""
    return re.sub(r"\d+", "N", text)


@pytest.mark.parametrize("argv", [["probe"], ["probe", "--size", "64MiB"]])
def test_probe_text_is_the_c_tools(argv):
    ours, theirs = both(*argv)
    assert ours.returncode == theirs.returncode == 0, ours.stderr
    assert counts_masked(ours.stdout) == counts_masked(theirs.stdout)
    assert ours.stderr == theirs.stderr
    assert "pages=auto for" in ours.stdout and "\nbackends\n" in ours.stdout


def test_probe_json_is_the_c_tools_and_the_functions():
    ours, theirs = both("probe", "--json", "--size", "64MiB")
    assert ours.returncode == theirs.returncode == 0, ours.stderr
    assert counts_masked(ours.stdout) == counts_masked(theirs.stdout)
    mine, c = json.loads(ours.stdout), json.loads(theirs.stdout)
    assert mine["schema"] == c["schema"] == 1
    assert mine["auto"] == c["auto"] and mine["auto"]["size"] == 64 << 20
    assert mine["kernel"] == c["kernel"] and mine["backends"] == c["backends"]
    assert sorted(sharedseg.probe("64MiB")) == sorted(c)


def test_python_output_written_before_comes_first():
    """sys.stdout is flushed before the C code writes to the same descriptor."""
    code = ("import sys; from sharedseg import cli\n"
            "print('before'); rc = cli.main(['--version']); print('after', rc)")
    env = env_with_package()
    env.pop("PYTHONUNBUFFERED", None)  # a pipe: sys.stdout holds its text until flushed
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["before", f"sharedseg {_native.LIBRARY_VERSION}",
                                        "after 0"], done.stdout


def test_the_commands_that_fork_are_not_run_in_the_interpreter():
    assert all(_native.cli_c_tool_only(c) for c in ("demo", "bench", "keep"))
    assert not _native.cli_c_tool_only("ls") and not _native.cli_c_tool_only("probe")
    with pytest.raises(ValueError, match="runs only in the C tool, not inside an interpreter"):
        _native.cli(["demo", "--ranks", "2"])
    with pytest.raises(TypeError):
        _native.cli(("ls",))
    with pytest.raises(ValueError, match="NUL"):
        _native.cli(["ls\0"])


def test_c_commands_without_the_c_tool_say_where_it_is():
    done = cli("demo", PATH="/nonexistent")
    assert done.returncode == 2
    assert "make; then ./build/sharedseg demo" in done.stderr, done.stderr


def test_c_commands_run_the_c_tool():
    done = cli("demo", "--ranks", "2", "--size", "4MiB", "--pages", "base",
               SHAREDSEG_CLI=c_tool())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 private copies would use" in done.stdout, done.stdout


def table_of(text, name):
    """The lines of one segment in the ls table: its line and its processes'."""
    lines, inside = [], False
    for line in text.splitlines():
        if not line.startswith(" "):
            inside = line.startswith(name + "  ")
        if inside:
            lines.append(line)
    return lines


def listed(text, name):
    return [s for s in json.loads(text)["segments"] if s["name"] == name]


def assert_ls_is_the_c_tools(name):
    """Other tests on this host add and drop segments between two listings:
    what is compared is this segment's part of each."""
    ours, theirs = both("ls")
    assert ours.returncode == theirs.returncode == 0, ours.stderr
    mine = table_of(ours.stdout, name)
    assert mine and mine == table_of(theirs.stdout, name), ours.stdout + theirs.stdout
    ours_json, theirs_json = both("ls", "--json")
    assert ours_json.returncode == theirs_json.returncode == 0, ours_json.stderr
    entry = listed(ours_json.stdout, name)
    assert len(entry) == 1 and entry == listed(theirs_json.stdout, name)
    return mine, entry[0]


def test_ls_lists_a_live_segment_as_the_c_tool_does():
    name = f"py-ls-live-{os.getpid()}"
    seg = sharedseg.create_shared_segment(name, size="4MiB", world_size=1, pages="base")
    try:
        s = [s for s in sharedseg.list_segments() if s["name"] == name]
        assert len(s) == 1 and s[0]["owner_pid"] == os.getpid(), s
        table, entry = assert_ls_is_the_c_tools(name)
        user = pwd.getpwuid(os.getuid()).pw_name
        assert table[0].startswith(f"{name}  user {user}, 4.0 MiB, base pages"), table
        assert entry["uid"] == os.getuid()
        assert table[1].startswith(f"    pid {os.getpid():<8} rank 0"), table
        assert entry["owner_pid"] == os.getpid() and entry["size"] == 4 << 20
    finally:
        seg.close()
    assert not [s for s in sharedseg.list_segments() if s["name"] == name]


def test_ls_lists_a_pool_as_the_c_tool_does():
    name = f"py-ls-pool-{os.getpid()}"
    with sharedseg.HostPool.open(name, meaning="model=m;block=16", chunk_size=4096, chunks=8,
                                 pages="base") as pool:
        pool.publish(pool.reserve(["a", "b", "c"]))
        hits = pool.get(["a", "nope"])
        ours, theirs = both("ls")
        assert ours.returncode == theirs.returncode == 0, ours.stderr
        mine = [ln for ln in table_of(ours.stdout, "pool " + name)]
        assert mine == table_of(theirs.stdout, "pool " + name), ours.stdout
        assert mine[0] == (f'pool {name}  "model=m;block=16", 8 chunks of 4.0 KiB '
                           f"(2.0 MiB, base pages)"), mine
        assert mine[1] == "    chunks: 3 used, 0 filling, 5 free, 1 pinned", mine
        assert mine[2].startswith("    hits 1, misses 1, stores 3, evictions 0, reclaims 0"), mine
        assert mine[3].split()[:4] == ["pid", str(os.getpid()), "slot", "0"], mine
        ours_json, theirs_json = both("ls", "--json")
        entry = [p for p in json.loads(ours_json.stdout)["pools"] if p["name"] == name]
        assert entry == [p for p in json.loads(theirs_json.stdout)["pools"] if p["name"] == name]
        assert entry == [p for p in sharedseg.list_pools() if p["name"] == name]
        (e,) = entry
        assert (e["used"], e["free"], e["pinned"], e["stores"]) == (3, 5, 1, 3)
        assert [p["pid"] for p in e["processes"]] == [os.getpid()] and e["kept_by"] is None
        pool.unpin(hits)
    assert not [p for p in sharedseg.list_pools() if p["name"] == name]


def test_ls_names_the_keeper_of_a_pool_among_a_hundred_dead_keepers():
    """A keeper killed leaves its socket behind: ls still finds the live
    keeper that holds a pool, however many dead ones lie beside it."""
    import socket
    from conftest import start_keeper
    name = f"py-ls-kept-{os.getpid()}"
    keeper = start_keeper(name)
    with open("/proc/net/unix") as f:
        rundir = next(os.path.dirname(ln.split()[-1]) for ln in f
                      if ln.rstrip().endswith(f"/keep-{name}"))
    dead = [os.path.join(rundir, f"keep-dead-{os.getpid()}-{i}") for i in range(100)]
    try:
        for path in dead:  # bound and closed: a socket file nobody listens on
            with socket.socket(socket.AF_UNIX) as s:
                s.bind(path)
        with sharedseg.HostPool.open(name, meaning="m", chunk_size=4096, chunks=2, pages="base",
                                     keeper=name):
            ours, theirs = both("ls", "--json")
            for out in (ours, theirs):
                (e,) = [p for p in json.loads(out.stdout)["pools"] if p["name"] == name]
                assert e["kept_by"] == name, e
    finally:
        for path in dead:
            os.unlink(path)
        keeper.terminate()
        keeper.communicate(timeout=30)


def test_ls_lets_go_of_a_kept_pool_whose_keeper_is_gone():
    """A kept pool is listed by its record file while its keeper holds it;
    once the keeper is gone and no process has the pool, ls (the Python
    command and the C tool alike) lists it no more and its record file
    goes: records of dead keepers' pools do not pile up for every listing
    to ask every keeper about."""
    from conftest import start_keeper
    name = f"py-ls-gone-{os.getpid()}"
    keeper = start_keeper(name)
    try:
        sharedseg.HostPool.open(name, meaning="m", chunk_size=4096, chunks=2, pages="base",
                                keeper=name).close()
        with open("/proc/net/unix") as f:
            rundir = next(os.path.dirname(ln.split()[-1]) for ln in f
                          if ln.rstrip().endswith(f"/keep-{name}"))
        record = os.path.join(rundir, f"pool.{name}")
        for out in both("ls", "--json"):
            (e,) = [p for p in json.loads(out.stdout)["pools"] if p["name"] == name]
            assert e["kept_by"] == name and e["processes"] == [], e
        assert os.path.exists(record)
    finally:
        keeper.terminate()
        keeper.communicate(timeout=30)
    for out in both("ls", "--json"):
        assert name not in [p["name"] for p in json.loads(out.stdout)["pools"]], out.stdout
    assert not os.path.exists(record)


HOLDER = '''
import sys
import sharedseg

seg = sharedseg.create_shared_segment(sys.argv[1], size="4MiB", world_size=1, mmap=False,
                                      device_id=0)
print(seg.info["backend"], flush=True)
sys.stdin.read()
seg.close()
'''


def test_ls_shows_a_cuda_segment_as_the_c_tool_does():
    """A cuda segment (the fake driver's) has no resident count: the table
    says so, as the C tool's does (the Python table once raised here)."""
    name = f"py-ls-cuda-{os.getpid()}"
    env = env_with_package(SHAREDSEG_CUDA_LIBRARY=built("libsseg_fake_cuda.so",
                                                        "the fake CUDA driver"),
                           SSEG_FAKE_CUDA="devices=2;numa=0,0")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, name], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline() == "cuda\n", holder.communicate(timeout=60)
        table, entry = assert_ls_is_the_c_tools(name)
        assert "4.0 MiB declared, auto pages, ? (cuda driver memory) resident" in table[0], table
        assert entry["backend"] == "cuda" and entry["resident_bytes"] is None
        assert entry["declared"] and entry["processes"][0]["mapped_bytes"] is None
    finally:
        out, err = holder.communicate(input="", timeout=60)
    assert holder.returncode == 0, out + err


def pid_masked(text):
    return re.sub(r"^sharedseg\[\d+\]", "sharedseg[PID]", text, flags=re.M)


def test_library_messages_are_the_c_tools_and_logging_gets_the_next_ones():
    """While the command runs, the library writes its messages to stderr as
    in the C tool; after it, they go to logging again."""
    env = env_with_package(SHAREDSEG_LOG="debug")
    code = ("import logging, sys, sharedseg; from sharedseg import cli\n"
            "logging.basicConfig(level=logging.DEBUG, format='PY %(message)s')\n"
            "rc = cli.main(['probe', '--size', '64MiB']); sys.stderr.write('--\\n')\n"
            "sharedseg.probe('64MiB'); sys.exit(rc)")
    ours = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    theirs = subprocess.run([c_tool(), "probe", "--size", "64MiB"], capture_output=True,
                            text=True, timeout=120, env=env)
    assert ours.returncode == theirs.returncode == 0, ours.stderr
    during, after = ours.stderr.split("--\n")
    assert theirs.stderr.startswith("sharedseg[") and "debug: " in theirs.stderr
    assert pid_masked(during) == pid_masked(theirs.stderr)
    assert after.startswith("PY ") and "sharedseg[" not in after, after


def test_an_argument_that_is_not_utf8_reaches_the_c_code_as_bytes():
    arg = os.fsdecode(b"\xff")
    code = f"import sys; from sharedseg import cli; sys.exit(cli.main(['probe', '--size', {arg!r}]))"
    ours = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120,
                          env=env_with_package())
    theirs = subprocess.run([c_tool(), "probe", "--size", b"\xff"], capture_output=True,
                            timeout=120)
    assert (ours.returncode, ours.stderr) == (theirs.returncode, theirs.stderr) == \
        (2, b"sharedseg probe: --size: '\\xff' is not a size (use 4096, 256MiB, 4G)\n")


def run_to(argv, stdout, env):
    """argv run with stdout at /dev/full ("full") or closed ("closed")."""
    if stdout == "closed":
        argv = ["sh", "-c", 'exec "$@" >&-', "sh", *argv]
    with open("/dev/full", "wb") as full:
        return subprocess.run(argv, stdout=full if stdout == "full" else None,
                              stderr=subprocess.PIPE, timeout=120, env=env)


# Python's -u makes C's stdout unbuffered: the in-process run has the C tool's
# sentence either way.
@pytest.mark.parametrize("unbuffered", ["1", ""])
@pytest.mark.parametrize("stdout,reason", [("full", "No space left on device"),
                                           ("closed", "Bad file descriptor")])
@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["help", "ls"], ["probe"],
                                  ["ls", "--json"]])
def test_output_refused_is_a_failure_with_a_sentence(argv, stdout, reason, unbuffered):
    env = env_with_package(PYTHONUNBUFFERED=unbuffered)
    ours = run_to([sys.executable, "-m", "sharedseg", *argv], stdout, env)
    theirs = run_to([c_tool(), *argv], stdout, env)
    assert (ours.returncode, ours.stderr) == (theirs.returncode, theirs.stderr) == \
        (1, f"sharedseg: write error: {reason}\n".encode()), ours.stderr


def test_a_command_word_that_is_not_utf8_is_the_c_tools_sentence():
    env = env_with_package()
    ours = subprocess.run([sys.executable, "-m", "sharedseg", b"\xff"], capture_output=True,
                          timeout=120, env=env)
    theirs = subprocess.run([c_tool(), b"\xff"], capture_output=True, timeout=120)
    assert (ours.returncode, ours.stdout, ours.stderr) == \
        (theirs.returncode, theirs.stdout, theirs.stderr) == \
        (2, b"", b"sharedseg: unknown command '\\xff' (commands: probe, demo, bench, ls, keep; "
                 b"see sharedseg --help)\n")


def test_an_earlier_commands_write_error_is_not_the_next_ones():
    code = ("import os, sys; from sharedseg import cli\n"
            "saved = os.dup(1); os.dup2(os.open('/dev/full', os.O_WRONLY), 1)\n"
            "first = cli.main(['--version']); os.dup2(saved, 1)\n"
            "second = cli.main(['--version']); sys.stderr.write(f'{first} {second}\\n')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env_with_package())
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"sharedseg {_native.LIBRARY_VERSION}\n"
    assert done.stderr == "sharedseg: write error: No space left on device\n1 0\n"


def test_value_lists_in_help_and_errors_are_the_librarys_tables():
    """A page kind, backend or population mode the library gains is listed
    by the tool without an edit of its own (tools/lib/args.c cli_names)."""
    from sharedseg.engines.base import choices
    pages, backends = choices("pages"), choices("backend")
    demo = tool("demo", "--help").stdout
    assert f"--backend B       {', '.join(backends)} " in demo
    assert f"--pages P         {', '.join(pages)} " in demo
    assert f"--pages P    {', '.join(pages)} " in tool("bench", "--help").stdout
    probe = cli("probe", "--help").stdout
    assert f"whether each backend ({', '.join(backends[1:])}) is available" in probe
    bad = tool("demo", "--populate", "nope")
    assert bad.returncode == 2
    assert f"(use {', '.join(choices('populate'))})" in bad.stderr


def test_bench_summary_figures_are_the_drivers_rows():
    """`sharedseg bench --json` (the Python command, which runs the C tool)
    takes each figure from one case of the benchmarks' driver and names
    it: that command, run alone, writes the row the figure came from, on
    the page kind the figure says."""
    done = cli("bench", "--size", "8MiB", "--pages", "base", "--reps", "2", "--json",
               SHAREDSEG_CLI=c_tool())
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["schema"] == 3 and summary["reps"] == 2 and summary["pages"] == "base"
    figures = {"owner_create": summary["population"]["sharedseg_2_threads"],
               "peer_attach": summary["peer_attach"], "seq_read": summary["read"]["shared"]}
    for bench, figure in figures.items():
        assert figure["pages"] == "base", figure
        argv = figure["command"].split()
        assert argv[:3] == ["sharedseg", "bench", "case"], figure
        alone = tool(*argv[1:])
        assert alone.returncode == 0, alone.stderr
        rows = [json.loads(line) for line in alone.stdout.splitlines()]
        assert [r for r in rows if r["bench"] == bench and r["mechanism"] == "sharedseg"
                and r["reps"] == 2 and r["pages_obtained"] == "base"], (bench, rows)
    population = summary["population"]
    assert population["ratio_2_threads"] == pytest.approx(
        population["private_buffer"]["median_s"] / population["sharedseg_2_threads"]["median_s"])
    assert summary["read"]["ratio"] == pytest.approx(
        summary["read"]["shared"]["median_gb_s"] / summary["read"]["private"]["median_gb_s"])
    # One unit for every rate: GB/s, population's as the reads'.
    owner = population["sharedseg_2_threads"]
    assert owner["median_gb_s"] == pytest.approx(summary["size"] / 1e9 / owner["median_s"],
                                                 rel=1e-3)


def test_bench_driver_errors_are_one_sentence():
    bad = tool("bench", "case", "--mechanism", "nope")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == "sharedseg bench: --mechanism nope: one of sharedseg, private, " \
                         "devshm, procfd\n"
    bad = tool("bench", "case", "--ranks", "1", "--bandwidth")
    assert bad.returncode == 2 and bad.stderr.endswith("--bandwidth needs a peer: --ranks 2 "
                                                       "or more\n")
