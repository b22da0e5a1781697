# SPDX-License-Identifier: Apache-2.0
"""The wheels and the sdist an engine's environment installs: `make wheels`
builds, with Zig for glibc 2.28, CPython 3.10's wheel and the abi3 one
(3.11+) for x86_64, the abi3 one for aarch64 (cross-built), and the sdist.
auditwheel shows that each wheel's symbols allow its manylinux_2_28 tag;
the x86_64 wheels install into fresh virtual environments of other
interpreters and run there, and two ranks run from an installed wheel with
the source tree off sys.path; the aarch64 wheel runs on Debian's arm64
CPython 3.11 under qemu-user; pip builds the sdist in a fresh environment.
A missing tool (a CPython 3.10, the build tools make deps installs) fails
with make's sentence."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest
from conftest import HELPERS, ROOT, free_port

import sharedseg

SMOKE = ("import sharedseg; s = sharedseg.create_shared_segment('py-wheel-one', size=4096, "
         "pages='base'); print(sharedseg.__file__, s.total_size(), sharedseg.__version__)")
# One process: create, write through the mapping, read back.
ROUND_TRIP = ("import platform, sharedseg; s = sharedseg.create_shared_segment('py-wheel-rw', "
              "size=1 << 20, pages='base'); b = s.buffer(); b[:5] = b'hello'; b[-1] = 7; "
              "print(platform.machine(), sharedseg.__file__, s.total_size(), bytes(b[:5]), b[-1])")
GLIBC = 28  # the wheels' manylinux_2_28 (python.mk's WHEEL_GLIBC)
ELF_MACHINE = {62: "x86_64", 183: "aarch64"}
ARM64_ROOT = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                          "sharedseg", "arm64-root")


def run(argv, timeout=300, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def newest_other_python():
    """A CPython 3.11+ of another minor version than this one (pyenv's, or on PATH)."""
    mine = "%d.%d" % sys.version_info[:2]
    for minor in ("3.13", "3.12", "3.11"):
        found = subprocess.run(["sh", "python/find-python.sh", minor], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        if found and minor != mine:
            return found
    raise AssertionError(f"no CPython 3.11-3.13 other than {mine} here (pyenv install 3.13)")


def smoke_in_fresh_venv(python, wheel, venv):
    """The wheel in a fresh environment of python: import, one rank, the command."""
    run([python, "-m", "venv", str(venv)])
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--no-index", "--no-deps", str(wheel)])
    env = {"PATH": os.environ["PATH"]}
    out = run([str(venv / "bin" / "python"), "-c", SMOKE], env=env, cwd="/").split()
    assert out[0].startswith(str(venv)) and out[1:] == ["4096", sharedseg.__version__], out
    for argv in ([str(venv / "bin" / "python"), "-m", "sharedseg"], [str(venv / "bin" / "sharedseg")]):
        assert json.loads(run(argv + ["probe", "--json"], env=env, cwd="/"))["schema"] == 1


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """make wheels, once for this file's tests: the folder of its wheels and sdist."""
    out = tmp_path_factory.mktemp("wheels")
    run(["make", "--no-print-directory", "wheels", f"PYTHON={sys.executable}",
         f"WHEEL_DIR={out / 'dist'}", f"PY_BUILD={out / 'build'}", "JOBS=2"], cwd=ROOT,
        timeout=900)
    return out / "dist"


def built_wheels(dist):
    """{(python tag, architecture): wheel}; the set is the one make wheels promises."""
    wheels = {(w.name.split("-")[2], re.search(r"manylinux_2_\d+_(\w+)\.whl$", w.name)[1]): w
              for w in dist.glob("sharedseg-*.whl")}
    mine = "cp%d%d" % sys.version_info[:2]
    abi3 = "cp311" if sys.version_info >= (3, 11) else mine
    assert set(wheels) == {("cp310", "x86_64"), (abi3, "x86_64"), ("cp311", "aarch64")}, \
        sorted(wheels)
    return wheels


def elf_machine(data):
    assert data[:4] == b"\x7fELF", data[:4]
    return ELF_MACHINE.get(int.from_bytes(data[18:20], "little"))


@pytest.mark.build
def test_each_wheel_is_manylinux_2_28_for_its_architecture(dist):
    tools = glob.glob(os.path.join(ROOT, "build-python", "tools-cpython-3*", "bin", "auditwheel"))
    assert tools, "no auditwheel in build-python/tools-*: make wheels did not install it"
    for (_, arch), wheel in built_wheels(dist).items():
        assert wheel.name.endswith(f"-manylinux_2_{GLIBC}_{arch}.whl"), wheel.name
        # auditwheel show names the oldest glibc the symbols allow (2.27 today).
        shown = " ".join(run([tools[0], "show", str(wheel)]).split())
        allowed = re.search(r'consistent with the following platform tag: "manylinux_2_(\d+)_(\w+)"',
                            shown)
        assert allowed and int(allowed[1]) <= GLIBC and allowed[2] == arch, shown
        zipped = zipfile.ZipFile(wheel)
        check_contents(zipped)
        natives = [n for n in zipped.namelist() if n.startswith("sharedseg/_native.")]
        if arch == "aarch64":
            assert natives == ["sharedseg/_native.abi3.so"], natives
        for name in natives + ["sharedseg/_tool/sharedseg", "sharedseg/_tool/sharedseg-bench"]:
            assert elf_machine(zipped.read(name)) == arch, (wheel.name, name)


@pytest.mark.build
def test_what_would_be_uploaded_passes_twine_check(dist):
    """Ready to publish: twine's check (its metadata, the README rendered as
    PyPI renders it) passes, warnings counted, on every wheel and the sdist;
    the metadata says the Pythons the wheels are for."""
    tools = glob.glob(os.path.join(ROOT, "build-python", "tools-cpython-3*", "bin", "twine"))
    assert tools, "no twine in build-python/tools-*: make wheels did not install it"
    files = sorted(str(f) for f in dist.iterdir() if f.name.endswith((".whl", ".tar.gz")))
    assert len(files) == 4, files
    out = run([tools[0], "check", "--strict"] + files)
    assert out.count("PASSED") == len(files), out
    meta = zipfile.ZipFile(files[0]).read(
        f"sharedseg-{sharedseg.__version__}.dist-info/METADATA").decode()
    assert "Requires-Python: >=3.10" in meta.splitlines(), meta[:800]
    assert {"Provides-Extra: " + e for e in ("torch", "numpy", "bf16", "mpi")} <= \
        set(meta.splitlines())


@pytest.mark.build
def test_wheels_install_on_other_interpreters(dist, tmp_path):
    wheels = built_wheels(dist)
    abi3 = next(t for t, arch in wheels if arch == "x86_64" and t != "cp310")
    py310 = subprocess.run(["sh", "python/find-python.sh", "3.10"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    smoke_in_fresh_venv(py310, wheels["cp310", "x86_64"], tmp_path / "venv-310")
    other = newest_other_python() if abi3 == "cp311" else getattr(sys, "_base_executable",
                                                                   sys.executable)
    smoke_in_fresh_venv(other, wheels[abi3, "x86_64"], tmp_path / "venv-other")
    two_ranks_from(wheels[abi3, "x86_64"], tmp_path)


@pytest.mark.build
def test_the_aarch64_wheel_runs_under_qemu(dist, tmp_path):
    """pip takes the wheel for an aarch64 CPython 3.11 of glibc 2.28 (not
    for this machine), and Debian's arm64 CPython 3.11 runs it under
    qemu-user: import, one segment written and read, python -m sharedseg,
    and the wheel's own C tool. The ranks of two processes, demo and ls are
    left to the x86_64 wheels: qemu-user answers mbind with ENOSYS, and its
    /proc is the host's (tests/cross/run.sh)."""
    wheel = built_wheels(dist)["cp311", "aarch64"]
    site = tmp_path / "site"
    run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
         "--no-index", "--target", str(site), "--platform", f"manylinux_2_{GLIBC}_aarch64",
         "--python-version", "3.11", "--implementation", "cp", "--only-binary=:all:", str(wheel)])
    qemu = ["qemu-aarch64-static", "-L", ARM64_ROOT]
    python = qemu + [os.path.join(ARM64_ROOT, "usr", "bin", "python3.11")]
    env = {"PYTHONPATH": str(site), "PATH": os.environ["PATH"]}
    out = run(python + ["-c", ROUND_TRIP], env=env, cwd="/").split()
    assert out == ["aarch64", f"{site}/sharedseg/__init__.py", str(1 << 20), "b'hello'", "7"], out
    said = run(python + ["-m", "sharedseg", "--help"], env=env, cwd="/")
    tool = qemu + [str(site / "sharedseg" / "_tool" / "sharedseg")]
    assert said == run(tool + ["--help"], env=env, cwd="/")
    assert said.startswith("usage: sharedseg COMMAND"), said
    assert "backends" in run(tool + ["probe"], env=env, cwd="/")
    assert json.loads(run(tool + ["probe", "--json"], env=env, cwd="/"))["schema"] == 1


@pytest.mark.build
def test_pip_builds_the_sdist_in_a_fresh_environment(dist, tmp_path):
    """pip install of the sdist as a user runs it: a fresh environment,
    scikit-build-core and cmake from PyPI, this machine's compiler; then
    the package and its C tool run."""
    sdists = list(dist.glob("sharedseg-*.tar.gz"))
    assert [s.name for s in sdists] == [f"sharedseg-{sharedseg.__version__}.tar.gz"], sdists
    names = tarfile.open(sdists[0]).getnames()
    top = f"sharedseg-{sharedseg.__version__}/"
    for needed in ("PKG-INFO", "pyproject.toml", "CMakeLists.txt", "include/sharedseg.h",
                   "python/sharedseg/__init__.py", "tools/main.c", "bench/CMakeLists.txt",
                   "tests/npu/npu_check.c", "LICENSE"):
        assert top + needed in names, needed
    outputs = [n for n in names if n.endswith((".so", ".o", ".whl"))
               or re.match(r"[^/]+/(build|build-[^/]*|dist)(/|$)", n)]
    assert not outputs, outputs
    venv = tmp_path / "venv"
    run([newest_other_python(), "-m", "venv", str(venv)])
    # Debian 12's cmake (3.25) is refused, as an older one would be (Ubuntu
    # 20.04 has 3.16): scikit-build-core asks pip for PyPI's.
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL="2", PIP_DISABLE_PIP_VERSION_CHECK="1",
               SKBUILD_CMAKE_VERSION=">=3.26")
    env.pop("PYTHONPATH", None)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-v",
                          str(sdists[0])], env=env, cwd=tmp_path, timeout=600, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert pip.returncode == 0, pip.stdout
    assert re.search(r"scikit-build-core \S+ using CMake (?!3\.25)", pip.stdout), pip.stdout
    env = {"PATH": os.environ["PATH"]}
    out = run([str(venv / "bin" / "python"), "-c", ROUND_TRIP], env=env, cwd="/").split()
    assert out[1].startswith(str(venv)) and out[2:] == [str(1 << 20), "b'hello'", "7"], out
    said = run([str(venv / "bin" / "python"), "-m", "sharedseg", "--help"], env=env, cwd="/")
    assert said.startswith("usage: sharedseg COMMAND"), said
    demo = run([str(venv / "bin" / "sharedseg"), "demo", "--ranks", "2", "--size", "16M"],
               env=env, cwd="/")
    assert demo.startswith("2 ranks mapped one 16.0 MiB segment"), demo


def check_contents(wheel):
    names = wheel.namelist()
    natives = [n for n in names if n.startswith("sharedseg/_native.") and n.endswith(".so")]
    assert len(natives) == 1, names
    assert not [n for n in names if n.endswith(".c") or "/tests/" in n], names
    assert "sharedseg/py.typed" in names and "sharedseg/cli.py" in names
    # demo and bench run the tool; bench runs the benchmarks' program beside it
    for name in ("sharedseg/_tool/sharedseg", "sharedseg/_tool/sharedseg-bench"):
        program = wheel.getinfo(name)
        assert (program.external_attr >> 16) & 0o111, (name, oct(program.external_attr >> 16))
    check_metadata(wheel)


def two_ranks_from(wheel, tmp_path):
    """This interpreter (its torch) with the wheel installed into a folder of its own."""
    site, work = tmp_path / "site", tmp_path / "work"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    run(pip + ["install", "--no-deps", "--no-index", "--target", str(site), str(wheel)])
    needs = run(["ldd", *site.glob("sharedseg/_native.*.so")])
    assert "sharedseg" not in needs, needs
    check_commands(site)

    work.mkdir()
    for helper in ("tcp_exchange.py", "tcp_rank.py"):
        shutil.copy(os.path.join(HELPERS, helper), work)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    port = free_port()
    ranks = [subprocess.Popen([sys.executable, "tcp_rank.py", "--rank", str(r), "--world", "2",
                               "--port", str(port), "--name", "py-wheel", "--torch"],
                              cwd=work, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in ranks]
    for r, (p, out) in enumerate(zip(ranks, outs)):
        assert p.returncode == 0, out
        assert out.strip().endswith(f"from {site}/sharedseg/__init__.py"), out
        assert f"ok rank {r} owner 0" in out, out


def check_metadata(wheel):
    meta = next(wheel.read(n).decode() for n in wheel.namelist() if n.endswith("/METADATA"))
    fields = [line.split(": ", 1) for line in meta.splitlines() if ": " in line]
    keys = {k for k, _ in fields}
    license_ok = ["License-Expression", "Apache-2.0"] in fields or ["License", "Apache-2.0"] in fields
    assert license_ok, meta
    assert ["Author", "the sharedseg developers"] in fields, meta
    assert {"Project-URL", "Classifier", "Requires-Python", "Summary"} <= keys, meta
    assert ["Classifier", "Typing :: Typed"] in fields
    assert ["Version", sharedseg.__version__] in fields, meta
    entry_points = next(wheel.read(n).decode() for n in wheel.namelist()
                        if n.endswith("/entry_points.txt"))
    assert "sharedseg = sharedseg.cli:main" in entry_points


def check_commands(site):
    """The console script and python -m sharedseg, from the installed wheel."""
    env = {"PYTHONPATH": str(site), "PATH": os.environ["PATH"]}
    script = site / "bin" / "sharedseg"
    for argv in ([str(script), "probe", "--json"], [sys.executable, "-m", "sharedseg", "probe",
                                                     "--json"]):
        out = run(argv, env=env, cwd="/")
        assert json.loads(out)["schema"] == 1
    check_demo(site)


def check_demo(site):
    """A pip user's first demo: no checkout, no C tool on PATH, no compiler.
    It prints what the wheel's own C tool prints, with its exit codes."""
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    tool = str(site / "sharedseg" / "_tool" / "sharedseg")
    for argv in ([str(site / "bin" / "sharedseg")], [sys.executable, "-m", "sharedseg"]):
        out = run(argv + ["demo", "--ranks", "2", "--size", "16M"], env=env, cwd="/")
        lines = out.splitlines()
        assert lines[0].startswith("2 ranks mapped one 16.0 MiB segment: backend memfd"), out
        header = next(i for i, line in enumerate(lines) if line.startswith("rank  role"))
        rows = [line.split() for line in lines[header + 1:header + 3]]
        assert [r[:2] for r in rows] == [["0", "owner"], ["1", "peer"]], out
        assert "2 private copies would use: 32.0 MiB" in lines, out
        # the benchmarks' program, found beside the wheel's tool: its own sentence
        bench = subprocess.run(argv + ["bench", "case", "--mechanism", "nope"], env=env, cwd="/",
                               capture_output=True, text=True)
        assert (bench.returncode, bench.stdout) == (2, "") and bench.stderr.startswith(
            "sharedseg bench: --mechanism nope: one of sharedseg, "), bench
        for bad in (["demo", "--bogus"], ["demo", "--ranks", "0"]):
            ours = subprocess.run(argv + bad, env=env, cwd="/", capture_output=True, text=True)
            c = subprocess.run([tool] + bad, env=env, cwd="/", capture_output=True, text=True)
            assert (ours.returncode, ours.stdout, ours.stderr) == \
                (c.returncode, c.stdout, c.stderr) and ours.returncode != 0, (ours, c)
