# SPDX-License-Identifier: Apache-2.0
"""The wheels an engine's environment installs without a compiler: `make
wheels` builds one for CPython 3.10 and one for this interpreter (abi3 on
3.11+), auditwheel names a manylinux tag, each installs into a fresh virtual
environment of another interpreter and runs there, and two ranks run from
the installed wheel with the source tree off sys.path. A missing tool (a
CPython 3.10, the build tools make deps installs) fails with make's sentence."""
import glob
import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from conftest import ROOT, TESTS, free_port

import sharedseg

SMOKE = ("import sharedseg; s = sharedseg.create_shared_segment('py-wheel-one', size=4096, "
         "pages='base'); print(sharedseg.__file__, s.total_size(), sharedseg.__version__)")


def run(argv, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kwargs)
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


@pytest.mark.build
def test_wheels_install_on_other_interpreters(tmp_path):
    dist = tmp_path / "dist"
    run(["make", "--no-print-directory", "wheels", f"PYTHON={sys.executable}",
         f"WHEEL_DIR={dist}", f"PY_BUILD={tmp_path / 'build'}", "JOBS=2"], cwd=ROOT)
    wheels = {w.name.split("-")[2]: w for w in dist.glob("sharedseg-*.whl")}
    mine = "cp%d%d" % sys.version_info[:2]
    abi3 = any(".abi3." in n for w in wheels.values()
                for n in zipfile.ZipFile(w).namelist())
    assert set(wheels) == {"cp310", "cp311" if abi3 else mine}, sorted(wheels)
    tools = glob.glob(os.path.join(ROOT, "build-python", "tools-cpython-3*", "bin", "auditwheel"))
    assert tools, "no auditwheel in build-python/tools-*: make wheels did not install it"
    for wheel in wheels.values():
        assert "-manylinux_" in wheel.name, wheel.name
        shown = run([tools[0], "show", str(wheel)])
        assert 'platform tag: "manylinux_' in " ".join(shown.split()), shown
        check_contents(zipfile.ZipFile(wheel))
    py310 = subprocess.run(["sh", "python/find-python.sh", "3.10"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    smoke_in_fresh_venv(py310, wheels["cp310"], tmp_path / "venv-310")
    other = newest_other_python() if abi3 else getattr(sys, "_base_executable", sys.executable)
    smoke_in_fresh_venv(other, wheels["cp311" if abi3 else mine], tmp_path / "venv-other")
    two_ranks_from(wheels["cp311" if abi3 else mine], tmp_path)


def check_contents(wheel):
    names = wheel.namelist()
    natives = [n for n in names if n.startswith("sharedseg/_native.") and n.endswith(".so")]
    assert len(natives) == 1, names
    assert not [n for n in names if n.endswith(".c") or "/tests/" in n], names
    assert "sharedseg/py.typed" in names and "sharedseg/cli.py" in names
    tool = wheel.getinfo("sharedseg/_tool/sharedseg")  # demo and bench run it
    assert (tool.external_attr >> 16) & 0o111, oct(tool.external_attr >> 16)
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
        shutil.copy(os.path.join(TESTS, helper), work)
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
        for bad in (["demo", "--bogus"], ["demo", "--ranks", "0"]):
            ours = subprocess.run(argv + bad, env=env, cwd="/", capture_output=True, text=True)
            c = subprocess.run([tool] + bad, env=env, cwd="/", capture_output=True, text=True)
            assert (ours.returncode, ours.stdout, ours.stderr) == \
                (c.returncode, c.stdout, c.stderr) and ours.returncode != 0, (ours, c)
