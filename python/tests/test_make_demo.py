# SPDX-License-Identifier: Apache-2.0
"""`make demo` as a newcomer reads it: one line for the build, then the
demo's table; the build's log only when the build fails."""
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SSEG_BUILD_DIR", "")

pytestmark = pytest.mark.debian  # the C build of this checkout, once per run


def make_demo(build, **env):
    return subprocess.run(["make", "--no-print-directory", "-C", ROOT, "demo", f"BUILD={build}"],
                          env=dict(os.environ, MAKEFLAGS="", **env), capture_output=True,
                          text=True, timeout=600)


def test_make_demo_shows_the_table_not_the_build():
    assert BUILD and os.path.isdir(BUILD), "make test-python sets SSEG_BUILD_DIR"
    done = make_demo(BUILD)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("building sharedseg (log: ")
    assert not any("Entering directory" in l or "Building C object" in l for l in lines)
    assert any("private copies would use" in l for l in lines), done.stdout
    assert len(lines) < 40, done.stdout


def test_a_failed_build_shows_its_log(tmp_path):
    cmake = tmp_path / "cmake"
    cmake.write_text("#!/bin/sh\necho 'the configure step went wrong' >&2\nexit 1\n")
    cmake.chmod(0o755)
    done = make_demo(str(tmp_path / "b"), CMAKE=str(cmake))
    assert done.returncode != 0
    assert "make demo: the build failed (its log is above)" in done.stderr
    assert "the configure step went wrong" in done.stdout  # the log, shown


def test_make_demo_builds_the_tool_alone(tmp_path):
    """A fresh build directory: the demo builds what it runs (the library
    and the tool), none of the test programs."""
    build = tmp_path / "b"
    done = make_demo(str(build))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (build / "sharedseg").exists()
    assert not (build / "tests" / "test_keeper").exists()
    assert "Building C object tests/" not in (build / "make-demo.log").read_text()
