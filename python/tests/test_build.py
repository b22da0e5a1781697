# SPDX-License-Identifier: Apache-2.0
"""`make python` builds the extension through CMake alone, for an
interpreter that has neither setuptools nor scikit-build-core, with the C
library's warnings as errors, and exports only PyInit__native."""
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import PACKAGE_ROOT, ROOT

import sharedseg


def run(argv, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.build
def test_make_python_builds_with_cmake_alone(tmp_path):
    venv = tmp_path / "bare"
    base = getattr(sys, "_base_executable", sys.executable)
    run([base, "-m", "venv", "--without-pip", str(venv)])
    python = str(venv / "bin" / "python")
    for backend in ("setuptools", "scikit_build_core"):
        probe = subprocess.run([python, "-c", f"import {backend}"], capture_output=True)
        assert probe.returncode != 0, f"this environment has {backend}: the test proves nothing"
    package = tmp_path / "site" / "sharedseg"
    shutil.copytree(os.path.join(PACKAGE_ROOT, "sharedseg"), package,
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    build = tmp_path / "build"
    run(["make", "--no-print-directory", "python", f"PYTHON={python}", f"PY_BUILD={build}",
         f"PY_OUTPUT={package}", "JOBS=2"], cwd=ROOT)
    (module,) = package.glob("_native*.so")
    out = run([python, "-c", "import sharedseg; s = sharedseg.create_shared_segment("
               "'py-bare', size=4096, pages='base'); print(sharedseg.__file__, s.total_size(), "
               "sharedseg.__version__)"],
              env={"PYTHONPATH": str(tmp_path / "site"), "PATH": os.environ["PATH"]})
    assert out.split() == [str(package / "__init__.py"), "4096", sharedseg.__version__], out
    exported = run(["nm", "-D", "--defined-only", str(module)]).split()
    assert [s for s in exported if s.startswith(("sseg", "Py", "cli_", "json"))] == \
        ["PyInit__native"], exported
    (abi,) = [d for d in build.iterdir() if d.name.startswith("cpython-")]
    flags = (abi / "CMakeFiles" / "sseg_native.dir" / "flags.make").read_text()
    assert re.search(r"^C_FLAGS = .*-Wall -Wextra -Werror", flags, re.M), flags


def test_the_version_is_written_once():
    """CMake's project version and __version__ come from include/sharedseg.h."""
    header = open(os.path.join(ROOT, "include", "sharedseg.h")).read()
    parts = [re.search(rf"^#define SSEG_VERSION_{p} (\d+)$", header, re.M).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    assert sharedseg.__version__ == ".".join(parts)
    for name in ("CMakeLists.txt", "pyproject.toml", "docs/python.md",
                 "python/tests/helpers/readme_install.sh", "python/sharedseg/__init__.py"):
        text = open(os.path.join(ROOT, name)).read()
        assert sharedseg.__version__ not in text, f"{name} writes the version again"
