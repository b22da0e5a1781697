# SPDX-License-Identifier: Apache-2.0
"""`make bench`: sharedseg side by side with what users run today, in one
run, on one machine, page kind by page kind.

Runs the matrix (quick by default, --full for the bigger one) through the C
driver, the benchmarks' program (`build/sharedseg-bench case ...`, which
`sharedseg bench case ...` runs), and the Python mechanisms (bench/pybench.py),
writes bench/results/latest.json, then docs/benchmarks.md and its plots
(bench/report.py). As root it sets the THP knobs and the HugeTLB pool that a
case needs and puts back what it found, also on Ctrl-C, SIGTERM and failure.
"""
import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time

import machine
import vllmbench
from matrix import build_matrix

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class Knobs:
    """Writes sysfs/procfs knobs, remembering what each held first, and
    restores them in reverse order."""

    def __init__(self):
        self.found = {}
        self.order = []
        self.can_write = os.geteuid() == 0

    def set(self, path, value):
        if not os.path.exists(path):
            return False
        if path not in self.found:
            self.found[path] = machine.knob(path)
            self.order.append(path)
        if not self.can_write:
            return machine.knob(path) == str(value)
        try:
            with open(path, "w") as f:
                f.write(str(value))
        except OSError:
            return False
        return True

    def restore(self):
        for path in reversed(self.order):
            try:
                with open(path, "w") as f:
                    f.write(self.found[path])
            except OSError as e:
                print(f"bench: could not restore {path} to {self.found[path]}: {e}",
                      file=sys.stderr)
        self.order.clear()

    def pool(self, pages):
        """Grows (or shrinks) the 2 MiB HugeTLB pool to pages; returns the
        free pages it then holds."""
        self.set(machine.NR_HUGEPAGES, pages)
        return machine.hugetlb_free()


class PeakSampler(threading.Thread):
    """The most memory in use (MemTotal - MemAvailable) while the matrix
    runs, above what was in use when it started."""

    def __init__(self):
        super().__init__(daemon=True)
        self.start_used = machine.mem_used()
        self.peak = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(0.2):
            self.peak = max(self.peak, machine.mem_used() - self.start_used)


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def run_driver(args, timeout):
    """(rows, None) or (None, reason, skipped?)"""
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s", False
    if p.returncode:
        lines = [ln for ln in p.stderr.strip().splitlines() if ln] or [f"exit {p.returncode}"]
        return None, " / ".join(lines[-3:]), p.returncode == 2
    # a row a line; a test program run as a case says more besides ("ok ...")
    return [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")], None, False


def prepare(case, knobs, budget):
    """None when the case can run now, else why not."""
    if case.memory > budget:
        return (f"needs {case.memory / 2**30:.1f} GiB, the budget is "
                f"{budget / 2**30:.1f} GiB (3/4 of MemAvailable at the start)")
    if case.shmem is not None and not knobs.set(machine.SHMEM_ENABLED, case.shmem):
        return f"shmem_enabled could not be set to {case.shmem} (needs root)"
    if case.hugetlb_pages:
        free = knobs.pool(max(case.hugetlb_pages + machine.POOL_SLACK,
                              int(knobs.found.get(machine.NR_HUGEPAGES, "0") or 0)))
        if free < case.hugetlb_pages:
            return (f"the 2 MiB HugeTLB pool has {free} free pages, the case needs "
                    f"{case.hugetlb_pages} (set /proc/sys/vm/nr_hugepages as root)")
    return None


def missing(case, env):
    """Why the case's interpreter is not here, or None."""
    if case.runner in ("vllm", "mooncake", "sglang_mooncake") and env["vllm_python"] is None:
        return (f"the engines' environment is missing (make deps installs vLLM and Mooncake "
                f"in the PyPI leg's virtual environment, $SHAREDSEG_PYPI_VENV or "
                f"~/.cache/sharedseg/venv-pypi)")
    return None


def run_matrix(cases, env, knobs, log):
    rows, skipped, failures = [], [], []
    budget = machine.mem_available() * 3 // 4
    for i, case in enumerate(cases, 1):
        why = missing(case, env) or prepare(case, knobs, budget)
        if why is None:
            t0 = time.monotonic()
            got, why, skip = run_driver(case.command(env), case.timeout)
            log(f"[{i}/{len(cases)}] {case.title} {time.monotonic() - t0:.1f} s"
                + (f": {why}" if why else ""))
        else:
            got, skip = None, True
            log(f"[{i}/{len(cases)}] {case.title}: skipped: {why}")
        if got is not None:
            for row in got:
                row.update(case.extra)
            rows += got
        elif skip:
            skipped.append(dict(case=case.title, reason=why))
        else:
            failures.append(dict(case=case.title, error=why))
        if case.hugetlb_pages and (i == len(cases) or not cases[i].hugetlb_pages):
            knobs.pool(int(knobs.found.get(machine.NR_HUGEPAGES, "0") or 0))
    return rows, skipped, failures


def dumps(result):
    """JSON with one row a line: small, and a rerun's diff reads row by row."""
    head = {k: v for k, v in result.items() if k != "rows"}
    rows = ",\n".join(json.dumps(r) for r in result["rows"])
    return json.dumps(head, indent=1)[:-2] + f',\n "rows": [\n{rows}\n]}}\n'


def updated(path, result, sections):
    """result's rows and cases of sections, in place of those sections' in
    the results file at path; everything else of that file as it was."""
    with open(path) as f:
        old = json.load(f)

    def others(cases):  # a case's title starts with its section
        return [c for c in cases if c["case"].split(":")[0] not in sections]
    old["rows"] = [r for r in old["rows"] if r.get("section") not in sections] + result["rows"]
    old["skipped"] = others(old.get("skipped", [])) + result["skipped"]
    old["failures"] = others(old.get("failures", [])) + result["failures"]
    for knob, value in result["knobs_found"].items():
        old.setdefault("knobs_found", {}).setdefault(knob, value)
    old.setdefault("updates", []).append(
        {k: result[k] for k in ("generated", "duration_s", "peak_memory_bytes")}
        | dict(sections=sorted(sections)))
    return old


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--full", action="store_true", help="the bigger matrix")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "latest.json"))
    ap.add_argument("--docs", default=os.path.join(ROOT, "docs"))
    ap.add_argument("--no-python", action="store_true", help="skip the Python mechanisms")
    ap.add_argument("--only", default="", help="comma-separated sections to run")
    ap.add_argument("--update", action="store_true",
                    help="put the rows of the sections run (--only) in place of theirs in "
                         "the results file, keep the rest of it")
    ap.add_argument("--no-report", action="store_true")
    ap.add_argument("--note", default="", help="a line the report shows at its top")
    args = ap.parse_args(argv)

    program = os.path.join(os.path.abspath(args.build), "sharedseg-bench")
    if not os.access(program, os.X_OK):
        sys.exit(f"bench: {program} is missing: build first (make)")
    env = dict(driver=[program], python=sys.executable, root=ROOT,
               pybench=os.path.join(HERE, "pybench.py"), vllm_python=vllmbench.venv_python(),
               vllmbench=os.path.join(HERE, "vllmbench.py"),
               sglang_mooncake=os.path.join(HERE, "sglang_mooncake.py"),
               pool_attack=os.path.join(os.path.abspath(args.build), "tests",
                                        "test_pool_attack"))
    facts = machine.facts()
    only = set(filter(None, args.only.split(",")))
    cases = build_matrix(args.full, facts, python=not args.no_python, only=only)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    knobs = Knobs()
    sampler = PeakSampler()
    started = time.monotonic()

    def log(msg):
        print(f"bench {time.monotonic() - started:6.1f}s {msg}", flush=True)

    log(f"{len(cases)} cases ({'FULL' if args.full else 'quick'} matrix)")
    try:
        knobs.set(machine.THP_ENABLED, facts["knobs"]["thp_enabled"]
                  if facts["knobs"]["thp_enabled"] in ("always", "madvise") else "madvise")
        sampler.start()
        rows, skipped, failures = run_matrix(cases, env, knobs, log)
    finally:
        knobs.restore()
        sampler.stop.set()
        machine.remove_leftovers()
    result = dict(schema=1, matrix="full" if args.full else "quick",
                  generated=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                  duration_s=round(time.monotonic() - started, 1),
                  peak_memory_bytes=sampler.peak, facts=facts,
                  knobs_found=knobs.found, note=args.note,
                  rows=rows, skipped=skipped, failures=failures)
    if args.update and os.path.exists(args.out):
        result = updated(args.out, result, only or {c.section for c in cases})
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(dumps(result))
    log(f"{len(rows)} rows, {len(skipped)} skipped, {len(failures)} failed -> {args.out}")
    if not args.no_report:
        import report
        report.write(result, args.docs, log)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
