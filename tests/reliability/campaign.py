#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The reliability campaign behind docs/reliability.md (`make reliability`).

Runs, at a larger scale than `make test`: the SIGKILL points (repeated, in
the release and the sanitizer builds), the hostile connections (bigger
floods), every fault site at each of its first calls, every single-bit
corruption of every rank's blob, the two-host group, the regression test
of each defect the hardening fixed, and every fuzz target for a while; then writes the document from
what the runs recorded (one JSON object a line, SSEG_RELIABILITY_OUT), so
that every figure in it was measured by the run that wrote it.
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402  (the document's writer, beside this file)


class Step:
    """One program of the campaign: its command, outcome and output."""

    def __init__(self, name, cmd, env=None, timeout=1800, tried=""):
        self.name, self.cmd, self.env, self.timeout = name, cmd, env or {}, timeout
        self.rc, self.seconds, self.output = None, 0.0, ""
        self.tried = tried  # a regression step: the bad input or fault it tries

    def run(self, tmp):
        """Runs it; returns its records (the JSON lines it wrote), tagged."""
        records = os.path.join(tmp, f"step{id(self)}.jsonl")
        env = dict(os.environ, SSEG_RELIABILITY_OUT=records, **self.env)
        t0 = time.monotonic()
        print(f"== {self.name}: {' '.join(self.cmd)}", flush=True)
        try:
            p = subprocess.run(self.cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace",
                               timeout=self.timeout)
            self.rc, self.output = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            self.rc, self.output = -1, (e.stdout or "") + f"\n(killed after {self.timeout} s)"
        except FileNotFoundError:
            self.rc, self.output = 127, f"{self.cmd[0]} is not built"
        self.seconds = time.monotonic() - t0
        tail = self.output.strip().splitlines()[-1:] or [""]
        print(f"   rc={self.rc} in {self.seconds:.0f} s: {tail[0]}", flush=True)
        self.records = []
        if os.path.exists(records):
            with open(records) as f:
                self.records = [dict(json.loads(line), step=self.name) for line in f
                                if line.strip()]
        return self


def fuzz_step(asan, target, seconds):
    work = os.path.join(asan, "fuzz", target)
    for sub in ("new", "artifacts"):
        os.makedirs(os.path.join(ROOT, work, sub), exist_ok=True)
    cmd = [os.path.join(asan, "fuzz", f"fuzz_{target}"), f"-max_total_time={seconds}",
           "-timeout=20", "-rss_limit_mb=4096", "-print_final_stats=1",
           f"-artifact_prefix={work}/artifacts/", os.path.join(work, "new"),
           os.path.join("tests", "fuzz", "corpus", target)]
    return Step(f"fuzz {target}", cmd, timeout=seconds + 600)


def fuzz_figures(step, target):
    """Executions, crashes and the first line of the sanitizer's report."""
    out = step.output
    execs = re.findall(r"stat::number_of_executed_units: (\d+)", out)
    done = re.findall(r"Done (\d+) runs in (\d+) second", out)
    crash = ""
    for pattern in (r"runtime error: .*", r"invariant broken: .*", r"ERROR: \w+Sanitizer: .*",
                    r"ERROR: libFuzzer: .*"):
        m = re.search(pattern, out)
        if m:
            crash = m.group(0).strip()
            break
    where = re.search(r"(\S+\.c:\d+:\d+): runtime error", out)
    where = where and os.path.relpath(where.group(1), ROOT)
    corpus = os.path.join(ROOT, "tests", "fuzz", "corpus", target)
    return dict(target=target, executions=int(execs[-1]) if execs else
                int(done[-1][0]) if done else 0,
                seconds=round(step.seconds), crashes=1 if step.rc else 0,
                crash=(where + ": " if where else "") + crash if step.rc else "",
                corpus=len(os.listdir(corpus)) if os.path.isdir(corpus) else 0)


# The defects the hardening work fixed, each with the regression test that
# tries its bad input again: (defect, what is tried, ctest name or Python
# test file).
REGRESSIONS = [
    ("a segment larger than memory", "sizes past MemAvailable and a memory cgroup's limit "
     "(v1 and v2 trees), populate in a limited cgroup, the first-touch fallback",
     "memory_limit"),
    ("sizes that wrap", "shape products, counts and sizes past 2^64, timeouts past range, "
     "lone surrogates, int block names, layout with size", "test_arguments.py"),
    ("a log that blocks the group", "floods of refused connections from another uid, stderr "
     "a pipe nobody drains; rate limits and the log callback", "intruders log"),
    ("a slowloris", "silent same-uid connections while a group completes", "intruders"),
    ("deferred teardown racing creates", "a destroy that fails into the pending list "
     "beside creates", "pending_race"),
    ("a squatted rendezvous name", "another process holding the local exchange's name, "
     "fork between create and complete, a full fd table, sealed fds, named errors", "edges"),
    ("Ctrl-C ignored in complete", "SIGINT while Python waits in complete and in population",
     "test_interrupt.py"),
    ("a hostile user's memfds in root's ls", "names not UTF-8, terminal escapes, a smaps line "
     "past 511 characters, a claimed driver tag, two groups of one user, 1,000 memfds, an "
     "exit before the render (uid 65534)", "ls_hostile ls"),
    ("a rogue writer into the Store exchange", "a bumped arrival count, gave-up with no "
     "reason, a value deleted once the count was full, 30,000 calls marked given up, an "
     "oversized value (peak RSS), against a real TCPStore", "test_store_rogue.py"),
    ("calls paired by arrival order", "two threads per rank creating two segments in crossed "
     "order over one Store; collective calls taking turns", "test_store_names.py"),
    ("a non-native byte order recorded as native", "'>f4' numpy dtypes in blocks",
     "test_dtypes.py"),
    # The third round.
    ("a peer's wait that outlived its owner", "the owner killed, destroying, or failing "
     "mid-population under an unbounded wait; its thread refused", "background"),
    ("a peer's wait_populated() that outlived its owner", "the owner stopped part-way, then "
     "killed, under wait_populated() with no timeout", "test_background.py"),
    ("the OOM killer inside background population", "memory taken between create and the "
     "first step in a 128 MiB cgroup; a peer in a tighter cgroup than the owner's",
     "memory_limit"),
    ("a local user breaking root's ls --json", "memfd names with quotes, backslashes, "
     "'x\":y', controls and invalid UTF-8, through the C tool and python -m sharedseg, "
     "parsed", "test_ls_hostile.py"),
    ("the agreed error lost when the store's host exits", "rank 0 exiting at once after an "
     "agreed error and after a success, 10 runs each", "test_gloo.py"),
    ("an in-process command taking every thread's messages", "200 library messages from "
     "another thread while a command runs", "test_logging.py"),
    ("the Python command's exit codes", "/dev/full, a closed stdout, a word not UTF-8, both "
     "commands compared", "test_cli.py"),
    ("messages that point the wrong way", "two users on one host, sizes with blanks, a "
     "thread that cannot start, a driver tag declaring 64 MiB, another user's segment, "
     "a busy host under the demo", "edges parse ls_hostile demo_cli hugetlb_use"),
    ("Ascend as its driver behaves", "a PCIe NPU (no HCCS), a child touching after fork, "
     "1 GiB pages refused at each step", "ascend_stack ascend_fork ascend_pages fake_acl"),
    # The fourth round. "pypi:" runs a test file on the engines' environment.
    ("a kept vLLM tier serving another block's bytes", "the kept tier is the host pool its "
     "keeper holds (no index of its own since): a keeper stopped (SIGSTOP) under an engine, "
     "then answering; an engine of another configuration refused", "pypi:test_vllm_keep.py"),
    ("another user keeping the keeper from its user", "20,000 connections by another uid while "
     "its user is served 50 times; a hand-over after a failed take; a keeper that never "
     "answers inside a 5 s create", "keeper_faults"),
    ("another user squatting a keeper's or a group's name", "the old abstract names bound by "
     "another uid, its socket files unbindable, its runtime directory made by another user",
     "keeper keeper_faults edges hostile_hub"),
    ("a kept segment given to two live groups, or freed under one", "a second group of the "
     "same and of another declaration while the first maps it; the first SIGKILLed",
     "keeper_faults"),
    ("kept memory that no owner can map writable", "memfds sealed F_SEAL_FUTURE_WRITE or "
     "opened read-only, held and given", "keeper_faults"),
    ("the keeper's own life", "nohup's SIGHUP, 12 open files, a second idle at debug level, "
     "a bad --name, an unknown command", "keeper_faults"),
    ("a size LMCache's plugin loader swallowed", "max_local_cpu_size inf, 1e300, NaN, 'abc', "
     "[1], true, 1e-12, 0, -1, None through vLLM's parsed --kv-transfer-config, LMCache's file "
     "and environment, and LMCache's plugin YAML; storage_plugins text, malformed "
     "extra_config, local_disk; an unforeseen error in the tier",
     "pypi:test_lmcache_refusals.py"),
    ("the bench leaving memory behind", "SIGINT to the group, SIGTERM to the parent, rank 0 "
     "SIGKILLed while the /dev/shm file is named; every command in a 512 MiB cgroup, past "
     "MemAvailable, past the HugeTLB pool, past an 8 MiB /dev/shm; blocks a gather cannot "
     "take", "bench_safety"),
    ("the device script's fixed rows on a small host", "the script through the fake driver "
     "at the sizes it picks here; the sizing rule for 16/125, 16/40, 8/125, 4/16, 2/22, 2/3 "
     "and 1 core/0.1 GiB, unreadable readings and a setting", "test_gpu_script.py"),
    ("a program of the working directory run as the C tool", "python -m sharedseg demo from "
     "a checkout with PATH unset, empty, ':' and with empty entries, a decoy ELF in the "
     "working directory; keep's sentence; SHAREDSEG_CLI naming no program and an unrunnable "
     "ELF, with an escape sequence, U+202E and bytes not UTF-8 in its path; escape sequences "
     "typed as a command, an option and a value, both commands", "test_cli_c_tool.py "
     "test_cli.py"),
    ("an SGLang switch that does nothing and says nothing", "SGLANG_PLUGINS unset, empty, "
     "listing sharedseg, omitting it, blank; no entry point (importable only), another "
     "distribution's of that name; the switch unset, JSON, malformed; another release; "
     "python -m sharedseg.sglang --check against SGLang's own load_plugins() in each",
     "pypi:test_sglang.py"),
    ("the tool without the benchmarks' program beside it", "sharedseg bench from a copy of "
     "the tool alone; the bench's functions looked for in the tool and the extension",
     "bench_leaf"),
]


def regression_steps(build, pypi_python):
    steps = []
    for defect, tried, tests in REGRESSIONS:
        if tests.endswith(".py"):
            python, leg = sys.executable, "debian"
            if tests.startswith("pypi:"):
                python, leg, tests = pypi_python, "pypi", tests[5:]
            cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"] + \
                [os.path.join("python", "tests", name) for name in tests.split()]
        else:
            cmd = ["ctest", "--test-dir", build, "--output-on-failure", "-R",
                   "^(" + "|".join(tests.split()) + ")$"]
            leg = None
        env = dict(SSEG_BUILD_DIR=build, **({"SSEG_TEST_LEG": leg} if leg else {}))
        step = Step(f"regression: {defect}", cmd, env, timeout=900, tried=tried)
        step.tests = tests
        steps.append(step)
    return steps


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            mem_kb = int(f.readline().split()[1])
    except OSError:
        mem_kb = 0
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True).stdout.strip()
    return dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                cpu=cpu, cores=os.cpu_count(), memory_gib=round(mem_kb / 2**20, 1),
                kernel=platform.release(), os=_os_name(), commit=commit or "unknown",
                root=os.geteuid() == 0)


def _os_name():
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--asan-build", default="build-asan")
    ap.add_argument("--fuzz-seconds", type=int, default=120)
    ap.add_argument("--kill-repeat", type=int, default=5)
    ap.add_argument("--hostile-scale", type=int, default=20)
    ap.add_argument("--out", default="docs/reliability.md")
    ap.add_argument("--pypi-python", default=os.path.join(
        os.environ.get("SHAREDSEG_PYPI_VENV") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sharedseg",
            "venv-pypi"), "bin", "python"),
        help="the engines' environment's interpreter, for the \"pypi:\" regression tests")
    args = ap.parse_args()
    # Relative to the tree, where every step runs: the page names no home.
    build = os.path.relpath(os.path.abspath(args.build), ROOT)
    asan = os.path.relpath(os.path.abspath(args.asan_build), ROOT)
    t = os.path.join
    steps = [
        Step("kill points", [t(build, "tests", "test_kill_points")],
             dict(SSEG_KILL_REPEAT=str(args.kill_repeat))),
        Step("kill points, ASan+UBSan", [t(asan, "tests", "test_kill_points")],
             dict(ASAN_OPTIONS="detect_leaks=1")),
        Step("hostile: fd channel", [t(build, "tests", "test_hostile")],
             dict(SSEG_HOSTILE_SCALE=str(args.hostile_scale))),
        Step("hostile: fd channel, ASan+UBSan", [t(asan, "tests", "test_hostile")],
             dict(ASAN_OPTIONS="detect_leaks=1")),
        Step("hostile: local exchange hub", [t(build, "tests", "test_hostile_hub")],
             dict(SSEG_HOSTILE_SCALE=str(args.hostile_scale))),
        Step("hostile: local exchange hub, ASan+UBSan", [t(asan, "tests", "test_hostile_hub")],
             dict(ASAN_OPTIONS="detect_leaks=1")),
        Step("fault sweep", [t(build, "tests", "test_fault_sweep")]),
        Step("fault sweep, ASan+UBSan", [t(asan, "tests", "test_fault_sweep")],
             dict(ASAN_OPTIONS="detect_leaks=1")),
        Step("blob bit flips", [t(build, "tests", "test_blob_bits")],
             dict(SSEG_BLOB_BITS_ALL="1")),
        Step("two hosts", [sys.executable, t("tests", "netns", "twohosts.py")],
             dict(SSEG_BUILD_DIR=build)),
    ] + regression_steps(build, args.pypi_python)
    targets = sorted(f[5:-2] for f in os.listdir(t(ROOT, "tests", "fuzz"))
                     if f.startswith("fuzz_") and f.endswith(".c"))
    with tempfile.TemporaryDirectory(prefix="sseg-reliability-") as tmp:
        for step in steps:
            step.run(tmp)
        fuzz = [fuzz_figures(fuzz_step(asan, name, args.fuzz_seconds).run(tmp), name)
                for name in targets]
    rows = [row for step in steps for row in step.records]
    doc = report.write(machine(), steps, rows, fuzz, vars(args))
    with open(t(ROOT, args.out), "w") as f:
        f.write(doc)
    print(f"wrote {args.out}")
    return 0 if all(s.rc in (0, 77) for s in steps) and not any(z["crashes"] for z in fuzz) \
        else 1


if __name__ == "__main__":
    sys.exit(main())
