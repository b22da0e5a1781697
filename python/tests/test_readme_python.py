# SPDX-License-Identifier: Apache-2.0
"""README.md's Python program runs as written (two processes, without
torch) and prints what it says; docs/python.md runs as written: its install
lines (readme_install.sh), its call (readme_call.py, run by the gloo ranks)
and the errors it shows (ERRORS below, produced here for real).
tests/readme.py checks that the documents' blocks are these lines."""
import errno
import os
import re
import subprocess
import sys
import threading
import time

import pytest
import torch.distributed as dist

from conftest import HELPERS, PACKAGE_ROOT, ROOT
from thread_ranks import run_ranks

from sharedseg import create_shared_segment
from sharedseg import _native

ERRORS = """
SharedSegmentValueError: segment 'vllm_sparse_kv': ranks 0-3 failed in complete:
the layouts differ: block 'k': rank 2 declared shape=bfloat16[512,16], rank 0
declared shape=bfloat16[16,512]

SharedSegmentValueError: segment 'kv': rank 3 failed in setup: unknown pages
'hugetlb-3M': expected auto, base, thp, hugetlb-2M, hugetlb-1G or hugetlb

SharedSegmentError: segment 'kv': rank 0 did not reach the blobs exchange within
2 s (over the StatelessProcessGroup's store); every rank gives up on this
segment, and the group itself was not used: it stays usable
"""


MARKER = "<!-- check: by python/tests/test_readme_python.py -->"


def readme_program():
    """The ```python block under MARKER in README.md, as a user copies it."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    after = text.split(MARKER + "\n", 1)[1]
    assert after.startswith("```python\n"), after[:40]
    return after.split("\n", 1)[1].split("\n```\n", 1)[0] + "\n"


def test_the_readme_program_runs_as_written_without_torch(tmp_path):
    """Pasted into share.py and run with the package on the path and torch
    not installed (an import of it fails, in the ranks too): each of the
    two ranks prints its segment and the sum rank 0 wrote, nothing else."""
    (tmp_path / "share.py").write_text(readme_program())
    (tmp_path / "notorch" / "torch").mkdir(parents=True)
    (tmp_path / "notorch" / "torch" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "notorch"), PACKAGE_ROOT]))
    env.pop("SHAREDSEG_LOG", None)
    run = subprocess.run([sys.executable, "share.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    line = re.compile(r"<SharedSegment 'kv_demo' rank ([01])/2 owner 0 128 KiB \S+ "
                      r"\(\d+ [KMG]iB pages\) base=0x[0-9a-f]+>: k\[3\] sums to 12288\.0")
    said = [line.fullmatch(x) for x in run.stdout.splitlines()]
    assert all(said) and sorted(m.group(1) for m in said) == ["0", "1"], run.stdout
    assert run.stderr == "", run.stderr


def shown():
    """Each error of ERRORS as one line."""
    return [" ".join(part.split("\n")) for part in ERRORS.strip().split("\n\n")]


def said(e):
    return f"{type(e).__name__}: {e}"


def test_the_errors_the_docs_show():
    def transposed(r, gather):
        shape = (512, 16) if r == 2 else (16, 512)
        return create_shared_segment("vllm_sparse_kv", {"k": dict(count=2, shape=shape,
                                     dtype="bfloat16")}, world_size=4, rank_id=r,
                                     exchange=gather, pages="base")

    def bad_pages(r, gather):
        return create_shared_segment("kv", {"k": (2, (16,), "f32")}, world_size=4, rank_id=r,
                                     exchange=gather, pages="hugetlb-3M" if r == 3 else "base")
    layouts, pages = run_ranks(4, transposed), run_ranks(4, bad_pages)
    assert all(said(e) == shown()[0] for e in layouts), [said(e) for e in layouts]
    assert all(said(e) == shown()[1] for e in pages), [said(e) for e in pages]
    assert said(stalled_owner()[1]) == shown()[2]


class Group:
    """vLLM's StatelessProcessGroup: rank, world_size, store."""

    def __init__(self, rank, world_size, store):
        self.rank, self.world_size, self.store = rank, world_size, store


def stalled_owner():
    """Two ranks over one store, the timeout 2 s; the owner's create ends
    only once rank 1 has given up on it."""
    store, got = dist.HashStore(), {}
    original = _native.create

    def slow(name, world_size, rank, owner, **kwargs):
        deadline = time.monotonic() + 30
        while rank == 0 and not store.add("sharedseg/kv/1/gave-up", 0):
            assert time.monotonic() < deadline, "rank 1 did not give up"
            time.sleep(0.05)
        return original(name, world_size, rank, owner, **kwargs)

    def rank(r):
        try:
            create_shared_segment("kv", {"k": (2, (16,), "f32")}, comm_group=Group(r, 2, store),
                                  pages="base", populate="lazy", timeout=2)
        except Exception as e:
            got[r] = e
    _native.create = slow
    try:
        threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        _native.create = original
    assert got[1].errno == errno.ETIMEDOUT and "gave up" in str(got[0])
    return got


@pytest.mark.debian
def test_the_install_lines_work(tmp_path):
    # Zig, make wheel's compiler, stays where make deps put it, outside HOME.
    env = dict(os.environ, HOME=str(tmp_path),
               XDG_CACHE_HOME=os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"))
    done = subprocess.run(["sh", f"{HELPERS}/readme_install.sh"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    venv_python = tmp_path / "venv-sharedseg" / "bin" / "python"
    out = subprocess.run([str(venv_python), "-c", "import sharedseg, torch; print(sharedseg."
                          "__file__, sharedseg.probe()['schema'])"], cwd="/", capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    path, schema = out.stdout.split()
    assert path.startswith(str(tmp_path / "venv-sharedseg")) and schema == "1"
