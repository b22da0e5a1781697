# SPDX-License-Identifier: Apache-2.0
"""The benchmarks' driver leaves nothing behind and refuses what it cannot
hold (ctest bench_safety): no /dev/shm file after SIGINT, SIGTERM or a rank
SIGKILLed; one sentence and exit 2, before anything is allocated, for a
command that does not fit MemAvailable, its memory cgroup (a child cgroup
made here, removed after) or /dev/shm, and for KV blocks a gather cannot
take. Each signal lands at a point where the file is named: rank 0 stops
itself there (SSEG_BENCH_HOLD) after saying so on stderr, which the test
reads before it signals.

    python3 bench/test_bench_safety.py   (or: python3 -m pytest bench/test_bench_safety.py)
"""
import contextlib
import errno
import os
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from test_bench import TOOL, run_tests, skip  # noqa: E402

MIB = 1 << 20
# Far below what the commands refused in it need, far above the tool itself.
CGROUP_LIMIT = 512 * MIB


def tool_or_skip():
    if not os.access(TOOL, os.X_OK):
        skip(f"{TOOL} is not built")


def refused(argv, **popen):
    """The tool's stderr for a command that must be refused: exit 2, nothing
    on stdout, one line on stderr."""
    p = subprocess.run(argv, capture_output=True, text=True, timeout=240, **popen)
    assert (p.returncode, p.stdout) == (2, ""), (argv, p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sharedseg bench: "), (argv, p.stderr)
    return lines[0]


# ---- the /dev/shm file of the devshm mechanism ----

def left_in_devshm(parent):
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(f"sseg-bench-{parent}-"))


@contextlib.contextmanager
def held_at(point):
    """A devshm case whose rank 0 stopped itself at point: (the bench's
    Popen, rank 0's pid). The bench runs in a session of its own, so that a
    signal to its process group reaches no one else; whatever is left of it
    is killed after."""
    tool_or_skip()
    bench = subprocess.Popen([TOOL, "bench", "case", "--mechanism", "devshm", "--ranks", "2",
                              "--size", "4MiB", "--reps", "1", "--warmup", "0"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, SSEG_BENCH_HOLD=point),
                             start_new_session=True)
    # a bound on a test gone wrong, not a measure of anything
    watchdog = threading.Timer(240, lambda: os.killpg(bench.pid, signal.SIGKILL))
    watchdog.start()
    try:
        line = bench.stderr.readline()
        held = re.fullmatch(rf"sharedseg bench: rank 0 \(pid (\d+)\) holds at {point}\n", line)
        assert held, f"expected rank 0 to hold at {point}, got {line!r}"
        yield bench, int(held.group(1))
    finally:
        watchdog.cancel()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(bench.pid, signal.SIGKILL)
        bench.wait()
        for name in left_in_devshm(bench.pid):  # what a failed run left
            os.unlink(os.path.join("/dev/shm", name))


def ended(bench):
    """The bench's exit status and the rest of its stderr."""
    rest = bench.stderr.read()
    return bench.wait(), rest


def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_devshm_file_is_unlinked_once_every_rank_has_it():
    """A rank's death, however it comes, cannot leave a name that no
    longer exists."""
    with held_at("unlinked") as (bench, rank0):
        assert left_in_devshm(bench.pid) == [], "every rank has the file open: its name " \
                                                "should be gone"
        bench.send_signal(signal.SIGTERM)
        assert ended(bench)[0] == -signal.SIGTERM


def test_sigint_to_the_group_leaves_no_file():
    """Ctrl-C: every process of the group gets SIGINT; the ranks die of it,
    the parent kills and reaps what is left and unlinks the file, then
    dies of SIGINT as it would have."""
    with held_at("named") as (bench, rank0):
        assert left_in_devshm(bench.pid) == [f"sseg-bench-{bench.pid}-0"]
        os.killpg(bench.pid, signal.SIGINT)
        rc, _ = ended(bench)
        assert rc == -signal.SIGINT, rc
        assert left_in_devshm(bench.pid) == []
        assert gone(rank0), "the parent reaps its ranks before it dies"


def test_sigterm_to_the_parent_leaves_no_file():
    with held_at("named") as (bench, rank0):
        bench.send_signal(signal.SIGTERM)
        rc, _ = ended(bench)
        assert rc == -signal.SIGTERM, rc
        assert left_in_devshm(bench.pid) == []
        assert gone(rank0)


def test_the_rank_that_named_the_file_killed_leaves_no_file():
    """Rank 0 created the file and would have unlinked it; SIGKILLed, it
    cannot: the parent, which outlives its ranks, does."""
    with held_at("named") as (bench, rank0):
        os.kill(rank0, signal.SIGKILL)
        rc, err = ended(bench)
        assert rc == 1, (rc, err)
        assert "sharedseg bench: rank 0 was killed by signal 9 (Killed)\n" in err, err
        assert left_in_devshm(bench.pid) == []


def test_devshm_refuses_what_dev_shm_cannot_hold():
    import vllmbench
    tool_or_skip()
    probe, why = vllmbench.in_small_devshm(["true"], "8m")
    if probe is None or subprocess.run(probe, capture_output=True).returncode:
        skip(why or "no private mount namespace here: no /dev/shm of our own to shrink")
    line = refused(vllmbench.in_small_devshm([TOOL, "bench", "case", "--mechanism", "devshm",
                                              "--size", "64MiB", "--reps", "1"], "8m")[0])
    assert line == "sharedseg bench: case --mechanism devshm --ranks 2 at --size 64.0 MiB " \
                   "needs 64.0 MiB at once, more than the 8.0 MiB free in /dev/shm: refused " \
                   "before allocating; use a smaller --size or remount it larger (mount -o " \
                   "remount,size=...)", line


# ---- memory: MemAvailable and the memory cgroup ----

def cgroup_parents():
    """(directory, limit file) where this process may make a child memory
    cgroup: its own cgroup v2 where that offers the memory controller to
    its children, else its v1 memory cgroup."""
    with open("/proc/self/cgroup") as f:
        entries = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in entries:
        for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            control = os.path.join(root + path, "cgroup.subtree_control")
            if controllers == "" and os.path.exists(control):
                with open(control) as f:
                    if "memory" in f.read().split():
                        yield root + path, "memory.max"
    for _, controllers, path in entries:
        if "memory" in controllers.split(","):
            yield "/sys/fs/cgroup/memory" + path, "memory.limit_in_bytes"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def remove_cgroup(group):
    """Kills whatever is left in it, then removes it: a group still
    holding a dying process is busy for a moment."""
    for attempt in range(200):
        with open(os.path.join(group, "cgroup.procs")) as f:
            for pid in f.read().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        try:
            os.rmdir(group)
            return
        except OSError as e:
            if e.errno != errno.EBUSY or attempt == 199:
                raise
        time.sleep(0.05)


@contextlib.contextmanager
def limited_cgroup(limit):
    """A new child memory cgroup of limit bytes: its directory; removed
    after, whatever happened in it."""
    if os.geteuid() != 0:
        skip("making a memory cgroup needs root")
    for parent, limit_file in cgroup_parents():
        group = os.path.join(parent, f"sseg-bench-test-{os.getpid()}")
        try:
            os.mkdir(group)
        except OSError:
            continue
        try:
            if not os.path.exists(os.path.join(group, limit_file)):
                continue  # a v2 group without the memory controller
            write(os.path.join(group, limit_file), str(limit))
            yield group
            return
        finally:
            remove_cgroup(group)
    skip("no memory cgroup (v2 with the memory controller, or v1) to make a child in")


def in_cgroup(group, *args):
    """The tool's sentence for bench args run inside group."""
    procs = os.path.join(group, "cgroup.procs")
    return refused([TOOL, "bench"] + [str(a) for a in args],
                   preexec_fn=lambda: write(procs, str(os.getpid())))


def sentence(line, what, size, need, room):
    """The refusal's parts: what, at which --size, needs how much, past which room."""
    m = re.fullmatch(r"sharedseg bench: (.+) at --size (\S+ \S+) needs (\S+ \S+) at once, more "
                     r"than (.+): refused before allocating; use a smaller --size.*", line)
    assert m, line
    assert m.groups()[:3] == (what, size, need), (m.groups(), line)
    assert room in m.group(4), (room, line)


def test_every_command_is_refused_what_its_memory_cgroup_cannot_hold():
    """Without the check each of these is OOM-killed in the group (exit
    137, no word), or the sharedseg mechanism fails in every rank."""
    tool_or_skip()
    room = "this process's memory cgroup allows (limit 512.0 MiB, "
    case = ["--ranks", 2, "--reps", 1, "--warmup", 0]
    with limited_cgroup(CGROUP_LIMIT) as group:
        sentence(in_cgroup(group, "limits", "--size", "384MiB"), "limits", "384.0 MiB",
                 "768.0 MiB", room)
        sentence(in_cgroup(group, "retouch", "--size", "768MiB"), "retouch", "768.0 MiB",
                 "768.0 MiB", room)
        sentence(in_cgroup(group, "alternatives", "--size", "768MiB"), "alternatives",
                 "768.0 MiB", "768.0 MiB", room)
        # private: a buffer a rank; shared: the segment, and the buffer the
        # first read is set against
        for mech, pages, size, need in (("private", "base", "384MiB", "768.0 MiB"),
                                         ("sharedseg", "base", "384MiB", "768.0 MiB"),
                                         ("devshm", "base", "384MiB", "768.0 MiB"),
                                         ("procfd", "thp", "384MiB", "768.0 MiB")):
            line = in_cgroup(group, "case", "--mechanism", mech, "--pages", pages, "--size",
                             size, *case)
            sentence(line, f"case --mechanism {mech} --ranks 2", "384.0 MiB", need, room)
        # the bandwidth phase's buffers beside the segment: two more and the ring
        line = in_cgroup(group, "case", "--mechanism", "sharedseg", "--size", "192MiB",
                         "--bandwidth", *case)
        sentence(line, "case --mechanism sharedseg --ranks 2", "192.0 MiB", "640.0 MiB", room)
        # what fits still runs
        p = subprocess.run([TOOL, "bench", "limits", "--size", "8MiB", "--reps", "1"],
                           capture_output=True, text=True, timeout=240,
                           preexec_fn=lambda: write(os.path.join(group, "cgroup.procs"),
                                                    str(os.getpid())))
        assert p.returncode == 0 and len(p.stdout.splitlines()) == 3, (p.returncode, p.stderr)


def test_a_command_past_memavailable_is_refused():
    """limits holds two buffers: each of 60% of the host's memory, which
    the kernel lets a process map, is more than MemAvailable together
    however much is free. In a cgroup, so that without the check the OOM
    killer takes the bench and nothing else."""
    tool_or_skip()
    with open("/proc/meminfo") as f:
        total = next(int(line.split()[1]) << 10 for line in f if line.startswith("MemTotal:"))
    size = total * 6 // 10 // MIB * MIB
    with limited_cgroup(CGROUP_LIMIT) as group:
        line = in_cgroup(group, "limits", "--size", size)
    assert "of memory available on this host (MemAvailable): refused before allocating; " \
           "use a smaller --size" in line, line


def test_a_command_past_the_hugetlb_pool_is_refused_naming_the_pool():
    """HugeTLB pages come from their pool, not from MemAvailable: 128 GiB
    of them is more than any pool of this machine holds."""
    tool_or_skip()
    line = refused([TOOL, "bench", "limits", "--pages", "hugetlb-2M", "--size", "64GiB"])
    m = re.fullmatch(r"sharedseg bench: limits at --size 64.0 GiB needs 128.0 GiB at once, more "
                     r"than the (\S+ \S+) free in the pool of hugetlb-2M pages: refused before "
                     r"allocating; use a smaller --size or add pages to the pool \(sharedseg "
                     r"probe says how\)", line)
    assert m, line


# ---- KV blocks ----

def test_blocks_a_gather_cannot_take_are_refused():
    """A block larger than half the segment (or than the staging ring) was
    gathered zero times and printed 0 GB/s."""
    tool_or_skip()
    bw = [TOOL, "bench", "case", "--ranks", "2", "--reps", "1", "--warmup", "0", "--bandwidth"]
    assert refused(bw + ["--size", "1MiB", "--blocks", "4MiB"]) == \
        "sharedseg bench: --blocks: a 4.0 MiB block is more than half of --size 1.0 MiB, what " \
        "a gather reads: use blocks of at most 512.0 KiB or a larger --size"
    # the default blocks (16K, 64K, 256K) over a small segment
    assert refused(bw + ["--size", "64KiB"]).startswith(
        "sharedseg bench: --blocks: a 64.0 KiB block is more than half of --size 64.0 KiB")
    assert refused(bw + ["--size", "1GiB", "--blocks", "16K,128MiB"]) == \
        "sharedseg bench: --blocks: a 128.0 MiB block is more than the 64.0 MiB staging ring " \
        "a gather copies into: use blocks of at most 64.0 MiB"


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
