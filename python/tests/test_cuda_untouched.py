# SPDX-License-Identifier: Apache-2.0
"""A memfd segment never touches CUDA: no torch.cuda call that initialises
it (torch.cuda.is_available() already creates a driver context on CUDA
builds, and a process that initialised CUDA cannot use it in fork()ed
children). On the PyPI leg torch is a CUDA build: the check is
torch.cuda.is_initialized() staying False, and no spied call at all."""
import subprocess
import sys

from conftest import LEG, env_with_package

SCRIPT = '''
import torch
calls = []

def spy(name, fn):
    def wrapped(*args, **kwargs):
        calls.append(name)
        return fn(*args, **kwargs)
    return wrapped

for name in ("_lazy_init", "init", "is_available", "current_device", "device_count",
             "set_device", "synchronize", "get_device_properties"):
    setattr(torch.cuda, name, spy(name, getattr(torch.cuda, name)))
for name in ("_cuda_getDeviceCount", "_cuda_init"):
    if hasattr(torch._C, name):
        setattr(torch._C, name, spy(name, getattr(torch._C, name)))

import sharedseg
blocks = {"k": dict(count=2, shape=(4, 8), dtype=torch.bfloat16)}
for kwargs in (dict(pages="base"), dict(pages="base", numa="none", populate="spread")):
    with sharedseg.create_shared_segment("py-nocuda", blocks, **kwargs) as seg:
        t = seg.tensors("k")
        t[1].fill_(2.0)
        del t
# Asking for host registration without a GPU: the device comes from torch
# only when torch already initialised CUDA, so still no call.
try:
    sharedseg.create_shared_segment("py-nocuda-reg", blocks, pages="base", host_register=True)
except sharedseg.SharedSegmentError as e:
    print("refused", e.errno != 0)
print("calls", calls)
print("initialized", torch.cuda.is_initialized())
print("cuda_build", torch.version.cuda is not None)
'''


def test_a_memfd_segment_does_not_initialise_cuda():
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env_with_package(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["calls"] == "[]", lines
    assert lines["initialized"] == "False"
    assert lines["refused"] == "True"  # no CUDA driver here: the library says so
    if LEG == "pypi":
        assert lines["cuda_build"] == "True", "the PyPI leg's torch must be a CUDA build"
