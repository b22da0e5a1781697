# SPDX-License-Identifier: Apache-2.0
"""MPI: the Python package over an mpi4py communicator, and the C example
examples/mpi_share.c (the two phases with MPI_Allgather), both under
mpirun -n 3 (Debian's Open MPI)."""
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import HELPERS, ROOT, env_with_package

RANKS = 3
# Open MPI refuses root without the first flag; the second lets 3 ranks run on 2 cores.
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(RANKS)]

# Debian's Open MPI and mpi4py (make deps): the PyPI leg deselects these
# (-m "not debian"); where they run, a missing install fails.
pytestmark = pytest.mark.debian


def needs(program, package):
    assert shutil.which(program), f"{program} is not installed (Debian: {package}; make deps)"


def mpirun(argv, **kwargs):
    run = subprocess.run(MPIRUN + argv, capture_output=True, text=True, timeout=120, **kwargs)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr}"
    return run.stdout


def test_mpi4py_communicator():
    needs("mpirun", "openmpi-bin")
    import mpi4py  # noqa: F401  (Debian: python3-mpi4py)
    out = mpirun(["-x", "PYTHONPATH", sys.executable, f"{HELPERS}/mpi_rank.py"],
                 env=env_with_package())
    # mpirun merges the ranks' stdout and may join two ranks' lines: find
    # each rank's record wherever it landed.
    lines = sorted(re.findall(r"rank \d+: shared=(?:True|False) owner=\d+ "
                              r"mismatch_named=(?:True|False)", out))
    assert lines == [f"rank {r}: shared=True owner=0 mismatch_named=True"
                     for r in range(RANKS)], out


def build_mpi_example(tmp_path):
    """Links the C library built by CMake (SSEG_BUILD_DIR) or, without one,
    compiles its sources along with the example."""
    needs("mpicc", "libopenmpi-dev")
    exe = str(tmp_path / "mpi_share")
    cmd = ["mpicc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror",
           f"-I{ROOT}/include", f"{ROOT}/examples/mpi_share.c", "-o", exe]
    lib = os.path.join(os.environ.get("SSEG_BUILD_DIR", ""), "libsharedseg.a")
    if os.environ.get("SSEG_BUILD_DIR") and os.path.exists(lib):
        cmd += [lib]
    else:
        cmd += [f"-I{ROOT}/src", "-Wno-unused-parameter", "-Wno-format-truncation"]
        for part in ("src", "src/os", "src/backend", "src/driver"):
            cmd += sorted(glob.glob(f"{ROOT}/{part}/*.c"))
    build = subprocess.run(cmd + ["-lpthread", "-ldl"], capture_output=True, text=True,
                           timeout=300)
    assert build.returncode == 0, build.stderr
    return exe


def test_c_example_mpi_share(tmp_path):
    needs("mpirun", "openmpi-bin")
    out = mpirun([build_mpi_example(tmp_path)])
    owners = re.findall(r"rank (\d+): (owner|peer), owner rank 0", out)
    assert sorted(owners) == [("0", "owner"), ("1", "peer"), ("2", "peer")], out
    assert f"{RANKS} ranks shared one {RANKS * 4 << 20}-byte segment" in out, out
