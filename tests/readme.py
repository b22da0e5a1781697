#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every code block of README.md and of every docs/*.md is checked against
what runs: each fenced block is preceded by a marker comment saying how, and
a block without one fails the check.

  <!-- check: file PATH -->      the block is PATH, whole (PATH is built and
                                  run by the test named in PATH's header)
  <!-- check: excerpt PATH -->   the block's lines appear, in order and
                                  together, in PATH (a file that runs)
  <!-- check: usage CMD -->      the block is the usage lines of
                                  `sharedseg CMD --help` (CMD "-" : --help)
  <!-- check: output ARGS -->    the block is what `sharedseg ARGS` prints,
                                  numbers and the kernel's name aside
  <!-- check: errors -->         each line is a sentence the library really
                                  says: tests/test_readme_errors prints them
  <!-- check: make -->           each line is `make TARGET`, a target that
                                  `make -n` accepts
  <!-- check: run -->            the block is run (sh, from the checkout,
                                  build/ meaning the build directory tested)
  <!-- check: paths -->          each line starts with a path of the tree
  <!-- check: by PATH -->        a test (PATH, which names the document)
                                  reads the block and checks it against what
                                  runs, where that runs (an engine's leg)

README.md is at most README_MAX_LINES lines.

Usage: readme.py SOURCE_DIR BUILD_DIR (exit 0 pass, 1 fail)."""
import fcntl
import glob
import os
import re
import subprocess
import sys


def documents(source):
    """README.md, then every docs/*.md, as paths relative to source."""
    docs = sorted(glob.glob(os.path.join(source, "docs", "*.md")))
    return ["README.md"] + [os.path.relpath(d, source) for d in docs]


# README.md is read whole by a newcomer: what does not fit goes to docs/.
README_MAX_LINES = 250

MARK = re.compile(r"<!-- check: (\w+)(?: (.*?))? -->\s*$")


def blocks(text):
    """(marker line or None, language, body lines, line number)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            lang = lines[i][3:].strip()
            start = i
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            marker = None
            k = start - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            if k >= 0 and MARK.match(lines[k]):
                marker = MARK.match(lines[k])
            yield marker, lang, lines[start + 1:j], start + 1
            i = j + 1
        else:
            i += 1


def contiguous(needle, hay):
    needle = [n.rstrip() for n in needle]
    hay = [h.rstrip() for h in hay]
    return any(hay[i:i + len(needle)] == needle for i in range(len(hay) - len(needle) + 1))


def normalise(line):
    line = re.sub(r"\d+(\.\d+)?", "N", line)
    return re.sub(r"kernel\s+\S+", "kernel K", line).rstrip()


def sharedseg(build, args):
    run = subprocess.run([f"{build}/sharedseg"] + args, capture_output=True, text=True,
                         timeout=120)
    return run.stdout


def usage(build, cmd):
    text = sharedseg(build, ["--help"] if cmd == "-" else [cmd, "--help"])
    out = []
    for line in text.splitlines():
        if not line.strip():
            break
        out.append(line)
    return out


KNOBS = {"/proc/sys/vm/nr_hugepages": "0",
         "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages": "0",
         "/sys/kernel/mm/transparent_hugepage/shmem_enabled": "never",
         "/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled": "inherit"}


def fresh_machine(fn):
    """Runs fn with the knobs at a fresh machine's defaults (root only),
    holding the tests' machine lock, and puts back what it found."""
    if os.geteuid() != 0:
        return None
    with open("/tmp/sharedseg-test-machine.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = {}
        try:
            for path, value in KNOBS.items():
                if os.path.exists(path):
                    text = open(path).read().strip()
                    saved[path] = re.sub(r".*\[(.*)\].*", r"\1", text)
                    open(path, "w").write(value)
            return fn()
        finally:
            for path, value in saved.items():
                open(path, "w").write(value)


def make_targets(body, source):
    for line in body:
        words = line.split("#")[0].split()
        if not words or words[0] != "make" or len(words) < 2:
            return f"'{line}' is not a make command"
        run = subprocess.run(["make", "-n", "-C", source] + words[1:], capture_output=True,
                             text=True, timeout=120)
        if run.returncode:
            return f"`{' '.join(words)}` is not a target: {run.stderr.strip()[:200]}"
    return None


def run_block(body, source, build):
    script = "\n".join(body).replace("build/", build.rstrip("/") + "/")
    run = subprocess.run(["sh", "-ec", script], cwd=source, capture_output=True, text=True,
                         timeout=300)
    return None if run.returncode == 0 else \
        f"the block failed ({run.returncode}): {(run.stdout + run.stderr)[-400:]}"


def check(marker, lang, body, source, build, doc):
    kind, arg = marker.group(1), marker.group(2) or ""
    if kind == "file":
        want = open(f"{source}/{arg}", encoding="utf-8").read().splitlines()
        return None if [b.rstrip() for b in body] == [w.rstrip() for w in want] else \
            f"the block is not {arg} as it is"
    if kind == "excerpt":
        hay = open(f"{source}/{arg}", encoding="utf-8").read().splitlines()
        return None if contiguous(body, hay) else f"the block is not an excerpt of {arg}"
    if kind == "usage":
        return None if [b.rstrip() for b in body] == usage(build, arg) else \
            f"the block is not the usage of `sharedseg {arg} --help`"
    if kind == "output":
        text = fresh_machine(lambda: sharedseg(build, arg.split()))
        if text is None:
            print(f"readme: `sharedseg {arg}` compared only as root (knobs at defaults)")
            return None
        got = [normalise(x) for x in text.splitlines()]
        missing = [b for b in body if b.strip() and normalise(b) not in got]
        return None if not missing else f"`sharedseg {arg}` does not print: {missing[:3]}"
    if kind == "errors":
        said = subprocess.run([f"{build}/tests/test_readme_errors", "--print"],
                              capture_output=True, text=True, timeout=120).stdout.splitlines()
        said = [normalise(x) for x in said]
        missing = [b for b in body if b.strip() and normalise(b.strip()) not in said]
        return None if not missing else f"the library does not say: {missing[:2]}"
    if kind == "make":
        return make_targets(body, source)
    if kind == "run":
        return run_block(body, source, build)
    if kind == "by":
        path = os.path.join(source, arg)
        return None if os.path.exists(path) and doc in open(path, encoding="utf-8").read() else \
            f"{arg} does not exist or does not read {doc}"
    if kind == "paths":
        missing = [b.split()[0] for b in body if b.strip() and
                   not os.path.exists(os.path.join(source, b.split()[0]))]
        return None if not missing else f"no such paths: {missing}"
    return f"unknown check '{kind}'"


def main():
    source, build = sys.argv[1], sys.argv[2]
    problems, n = [], 0
    docs = documents(source)
    for doc in docs:
        text = open(f"{source}/{doc}", encoding="utf-8").read()
        for marker, lang, body, line in blocks(text):
            n += 1
            if not marker:
                problems.append(f"{doc}:{line}: a ```{lang} block without a check marker")
                continue
            why = check(marker, lang, body, source, build, doc)
            if why:
                problems.append(f"{doc}:{line}: {why}")
    lines = open(f"{source}/README.md", encoding="utf-8").read().count("\n")
    if lines > README_MAX_LINES:
        problems.append(f"README.md: {lines} lines, at most {README_MAX_LINES}: a newcomer reads "
                        "it whole; the rest belongs in docs/")
    for p in problems:
        print(p)
    verdict = f"{len(problems)} problem(s)" if problems else "all checked"
    print(f"readme: {n} code blocks in {len(docs)} documents, {verdict}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
