# SPDX-License-Identifier: Apache-2.0
"""torch and numpy are optional: with their imports blocked, the package
imports, probes and creates; tensors() and arrays() say what to install."""
import subprocess
import sys

from conftest import env_with_package

BLOCKED = '''
import sys

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "numpy"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NotInstalled())
'''

SCRIPT = BLOCKED + '''
import sharedseg
assert sharedseg.probe()["memfd"]
assert sharedseg.supported("memfd", "base") == (True, "")
seg = sharedseg.create_shared_segment(
    "py-notorch", {"k": dict(count=2, shape=(4, 4), dtype="bfloat16")}, pages="base")
for method in ("tensors", "arrays"):
    try:
        getattr(seg, method)("k")
    except ImportError as e:
        print(f"{method}: {e}")
seg.buffer()[:2] = b"ok"
print("buffer:", bytes(seg.buffer()[:2]).decode())
seg.close()
print("imported:", sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "numpy")))
'''


def test_import_probe_supported_and_focused_errors_without_torch():
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env_with_package(),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = dict(line.split(": ", 1) for line in run.stdout.splitlines())
    assert "needs PyTorch" in lines["tensors"] and "install torch" in lines["tensors"]
    assert "needs numpy" in lines["arrays"] and "install numpy" in lines["arrays"]
    assert lines["buffer"] == "ok" and lines["imported"] == "[]"
