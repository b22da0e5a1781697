"""examples/torch_tp_share.py: 4 gloo ranks offload MLA-shaped KV into one
segment and use about one copy of host memory, not four."""
import re
import subprocess
import sys

from conftest import ROOT, env_with_package


def test_torch_tp_share_uses_about_one_copy(knobs_steady):
    run = subprocess.run([sys.executable, f"{ROOT}/examples/torch_tp_share.py"],
                         env=env_with_package(), capture_output=True, text=True, timeout=150)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "61 layers x 4096 tokens x 576 bf16" in out, out
    assert "every rank read every layer: True, zero copy: True" in out, out
    copies = float(re.search(r"^4 ranks used ([\d.]+) copies", out, re.M).group(1))
    assert 0.9 <= copies <= 1.1, out
