# SPDX-License-Identifier: Apache-2.0
"""examples/torch_tp_share.py: 4 gloo ranks offload MLA-shaped KV into one
segment and use about one copy of host memory, not four: on whatever pages
the host gives (pages="auto"), and on HugeTLB pages from a free pool, which
smaps counts apart from PSS."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, env_with_package, machine_lock

HUGETLB_2M = "/sys/kernel/mm/hugepages/hugepages-2048kB"


def run_example():
    run = subprocess.run([sys.executable, f"{ROOT}/examples/torch_tp_share.py"],
                         env=env_with_package(), capture_output=True, text=True, timeout=150)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "61 layers x 4096 tokens x 576 bf16" in out, out
    assert "every rank read every layer: True, zero copy: True" in out, out
    copies = float(re.search(r"^4 ranks used ([\d.]+) copies", out, re.M).group(1))
    assert 0.9 <= copies <= 1.1, out
    return out


def test_torch_tp_share_uses_about_one_copy(knobs_steady):
    run_example()


def read(path):
    with open(path) as f:
        return int(f.read())


def write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


@pytest.fixture
def free_hugetlb_pool():
    """150 more free 2 MiB HugeTLB pages (the example needs 138), given back
    after; the C tests' machine lock is held exclusively meanwhile."""
    if os.geteuid() != 0:
        pytest.skip("growing the HugeTLB pool needs root")
    with machine_lock(exclusive=True):
        saved = read(f"{HUGETLB_2M}/nr_hugepages")
        try:
            write(f"{HUGETLB_2M}/nr_hugepages", saved + 150)
            if read(f"{HUGETLB_2M}/free_hugepages") < 140:
                pytest.fail("the kernel did not grow the HugeTLB pool by 140 pages (memory is "
                            "too fragmented, or taken)")
            yield
        finally:
            write(f"{HUGETLB_2M}/nr_hugepages", saved)


def test_torch_tp_share_counts_hugetlb_pages(free_hugetlb_pool):
    out = run_example()
    assert "hugetlb-2M pages (2048 KiB)" in out, out
