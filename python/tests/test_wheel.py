# SPDX-License-Identifier: Apache-2.0
"""The wheel carries everything it needs: build it offline, install it into
a directory of its own, and run two ranks from there with the source tree
off sys.path."""
import json
import os
import shutil
import subprocess
import sys
import zipfile

from conftest import ROOT, TESTS, free_port


def run(argv, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_installed_wheel_runs_two_ranks(tmp_path):
    wheels, site, work = tmp_path / "wheels", tmp_path / "site", tmp_path / "work"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    run(pip + ["wheel", "--no-build-isolation", "--no-deps", "-w", str(wheels), ROOT], cwd=ROOT)
    (wheel,) = wheels.glob("sharedseg-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("sharedseg/_native.") and n.endswith(".so") for n in names), names
    assert not [n for n in names if n.endswith(".c") or "/tests/" in n], names
    assert "sharedseg/py.typed" in names and "sharedseg/cli.py" in names
    check_metadata(zipfile.ZipFile(wheel))
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
