# SPDX-License-Identifier: Apache-2.0
"""The extension builds without setuptools (fresh 3.12+ virtual
environments have none): python/build_native.py needs only the
interpreter's headers and a C compiler."""
import os
import shutil
import subprocess
import sys
import sysconfig

from conftest import PACKAGE_ROOT, ROOT


def run(argv, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_an_environment_without_setuptools_builds_and_imports(tmp_path):
    venv = tmp_path / "bare"
    base = getattr(sys, "_base_executable", sys.executable)
    run([base, "-m", "venv", "--without-pip", str(venv)])
    python = str(venv / "bin" / "python")
    probe = subprocess.run([python, "-c", "import setuptools"], capture_output=True)
    assert probe.returncode != 0, "this environment has setuptools: the test proves nothing"
    package = tmp_path / "site" / "sharedseg"
    shutil.copytree(os.path.join(PACKAGE_ROOT, "sharedseg"), package,
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    output = package / ("_native" + sysconfig.get_config_var("EXT_SUFFIX"))
    run([python, os.path.join(ROOT, "python", "build_native.py"), "--output", str(output),
         "--build-dir", str(tmp_path / "objects")])
    out = run([python, "-c", "import sharedseg; s = sharedseg.create_shared_segment("
               "'py-bare', size=4096, pages='base'); print(sharedseg.__file__, s.total_size())"],
              env={"PYTHONPATH": str(tmp_path / "site"), "PATH": os.environ["PATH"]})
    assert out.split() == [str(package / "__init__.py"), "4096"], out
