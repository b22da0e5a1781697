# SPDX-License-Identifier: Apache-2.0
"""Nothing links the benchmarks (ctest bench_leaf): every function that
bench/*.c defines is in the benchmarks' program (sharedseg-bench) and in
neither the tool nor the Python extension (make python's, under
python/sharedseg/), by name (those names the library has a function of
its own by, like a static unmap(), are left out); the program parses no
JSON (the summary takes its rows as structs); the tool runs the program
found beside it, through a symbolic link too, and where it is missing
says so in one sentence, exit 2.

    python3 bench/test_bench_leaf.py   (or: python3 -m pytest bench/test_bench_leaf.py)
    SSEG_BENCH_TOOL, SSEG_BENCH_PROGRAM and SSEG_BENCH_LIBRARY name the
    build's tool, program and static library (default: build/sharedseg, and
    sharedseg-bench and libsharedseg.a beside it).
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from test_bench import TOOL, run_tests, skip  # noqa: E402

PROGRAM = os.environ.get("SSEG_BENCH_PROGRAM",
                         os.path.join(os.path.dirname(TOOL), "sharedseg-bench"))
LIBRARY = os.environ.get("SSEG_BENCH_LIBRARY",
                         os.path.join(os.path.dirname(TOOL), "libsharedseg.a"))
# A definition with external linkage: "int case_run(const struct bench_case *bc)\n{".
DEFINITION = re.compile(r"^(?!static\b)[A-Za-z_][\w \*]*?\b(\w+)\s*\([^;{}()]*\)\s*\{", re.M)


def bench_functions():
    names = set()
    for path in glob.glob(os.path.join(HERE, "*.c")):
        with open(path, encoding="utf-8") as f:
            names.update(DEFINITION.findall(f.read()))
    names.discard("main")
    assert len(names) > 40, f"only {sorted(names)} found in bench/*.c: the pattern is wrong"
    return names


def built():
    """The build's tool; the program must be beside it, built with it."""
    if not os.access(TOOL, os.X_OK):
        skip(f"{TOOL} is not built")
    assert os.access(PROGRAM, os.X_OK), f"the build of {TOOL} has no {PROGRAM}"


def defined(binary):
    """The names nm lists as defined in binary, local ones too (the
    extension exports PyInit__native alone), without gcc's clone suffixes."""
    out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1].split(".")[0] for line in out.splitlines() if line.strip()}


def extensions():
    found = glob.glob(os.path.join(os.path.dirname(HERE), "python", "sharedseg", "_native*.so"))
    if not found:
        skip("no python/sharedseg/_native*.so: make python builds it")
    return found


def test_the_bench_program_has_every_bench_function():
    built()
    missing = bench_functions() - defined(PROGRAM)
    assert not missing, f"{PROGRAM} lacks {sorted(missing)}"


def test_neither_the_tool_nor_the_extension_has_a_bench_function():
    built()
    ours = bench_functions() - defined(LIBRARY)
    for binary in [TOOL] + extensions():
        linked = ours & defined(binary)
        assert not linked, f"{binary} links the benchmarks' {sorted(linked)}"


def test_no_program_parses_json():
    """The summary takes its rows as structs, and the tool prints its
    documents from structs: neither the program nor the tool has a JSON
    reader (json_parse was the tool's)."""
    built()
    for program in (TOOL, PROGRAM):
        assert not {"json_parse", "json_get"} & defined(program), program


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def the_program_ran(tool):
    """The driver's own sentence for a bad argument: the program ran, with
    the arguments after "bench"."""
    bad = run([tool, "bench", "case", "--mechanism", "nope"])
    assert (bad.returncode, bad.stdout) == (2, ""), (tool, bad.returncode, bad.stderr)
    assert bad.stderr.startswith("sharedseg bench: --mechanism nope: one of sharedseg, "), \
        (tool, bad.stderr)


def test_the_tool_runs_the_program_beside_it_through_a_link():
    built()
    with tempfile.TemporaryDirectory() as folder:
        link = os.path.join(folder, "sharedseg")
        os.symlink(os.path.abspath(TOOL), link)
        the_program_ran(link)


def test_bench_help_is_the_programs():
    """`sharedseg bench --help` is the program's (the man page is made from
    it); `sharedseg help bench`, which the Python command prints without a
    C tool, names the program."""
    built()
    helped, program = run([TOOL, "bench", "--help"]), run([PROGRAM, "--help"])
    assert helped.returncode == 0 and helped.stdout == program.stdout, (helped, program)
    assert "sharedseg bench case --mechanism M" in helped.stdout, helped.stdout
    short = run([TOOL, "help", "bench"])
    assert short.returncode == 0 and "sharedseg bench ARGS runs sharedseg-bench ARGS" in \
        short.stdout, short


def test_the_installed_tool_runs_the_installed_program():
    """make install puts the program beside the tool, in bin/."""
    built()
    assert shutil.which("cmake"), "no cmake to install the build with"
    with tempfile.TemporaryDirectory() as prefix:
        done = run(["cmake", "--install", os.path.dirname(TOOL), "--prefix", prefix])
        assert done.returncode == 0, done.stdout + done.stderr
        assert os.access(os.path.join(prefix, "bin", "sharedseg-bench"), os.X_OK)
        the_program_ran(os.path.join(prefix, "bin", "sharedseg"))


def test_a_tool_without_the_program_says_so():
    built()
    with tempfile.TemporaryDirectory() as folder:
        alone = os.path.join(folder, "sharedseg")
        shutil.copy(TOOL, alone)
        done = run([alone, "bench", "--size", "8MiB"])
    assert (done.returncode, done.stdout) == (2, ""), (done.returncode, done.stderr)
    assert done.stderr == (
        f"sharedseg bench: the benchmarks' program is not beside this tool (no executable "
        f"{folder}/sharedseg-bench): build it with the tool (make) or install both "
        f"(make install)\n"), done.stderr


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
