# SPDX-License-Identifier: Apache-2.0
"""tests/readme.py itself, on a tree of its own: it reads README.md and
every docs/*.md, checks their marked blocks alike, and fails on a block
without a marker wherever it is."""
import os
import subprocess
import sys

from conftest import ROOT

FENCE = "```"


def checked(tmp_path, readme, docs):
    """readme.py's exit status and output over a tree holding README.md,
    docs/NAME for each of docs, and present.txt (a path the blocks name)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "present.txt").write_text("here\n")
    (tmp_path / "README.md").write_text(readme)
    for name, text in docs.items():
        (tmp_path / "docs" / name).write_text(text)
    run = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "readme.py"),
                          str(tmp_path), str(tmp_path / "build")],
                         capture_output=True, text=True, timeout=60)
    return run.returncode, run.stdout


def block(lines, marker=None):
    head = f"<!-- check: {marker} -->\n" if marker else ""
    return f"# doc\n\n{head}{FENCE}sh\n{lines}\n{FENCE}\n"


def test_every_document_is_read_and_passes_when_each_block_holds(tmp_path):
    rc, out = checked(tmp_path, readme=block("present.txt", "paths"),
                      docs={"a.md": block("present.txt  a path", "paths"),
                            "b.md": "# no code here\n"})
    assert rc == 0, out
    assert "readme: 2 code blocks in 3 documents, all checked" in out, out


def test_an_unmarked_block_in_docs_fails(tmp_path):
    rc, out = checked(tmp_path, block("present.txt", "paths"),
                      {"a.md": block("present.txt", "paths"), "b.md": block("echo hi")})
    assert rc == 1, out
    assert "docs/b.md:3: a ```sh block without a check marker" in out, out
    assert "1 problem(s)" in out, out


def test_an_unmarked_block_in_the_readme_fails(tmp_path):
    rc, out = checked(tmp_path, block("echo hi"), {"a.md": block("present.txt", "paths")})
    assert rc == 1, out
    assert "README.md:3: a ```sh block without a check marker" in out, out


def test_a_marked_block_in_docs_is_checked(tmp_path):
    rc, out = checked(tmp_path, block("present.txt", "paths"),
                      {"a.md": block("absent.txt", "paths")})
    assert rc == 1, out
    assert "docs/a.md:4: no such paths: ['absent.txt']" in out, out
