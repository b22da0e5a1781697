# SPDX-License-Identifier: Apache-2.0
"""The CUDA paths from Python, through the project's fake driver (the C
build's libsseg_fake_cuda.so): mmap=False gives a CUDA VMM segment with a
device address; host_register=True registers a memfd segment. Untested on a
real GPU here."""
import subprocess
import sys

from conftest import built, env_with_package

SCRIPT = '''
import torch
from sharedseg import create_shared_segment

blocks = {"kv": dict(count=3, shape=(64, 576), dtype=torch.bfloat16)}
with create_shared_segment("py-cuda-vmm", blocks, mmap=False, device_id=1) as seg:
    info = seg.info
    print("vmm", info["backend"], info["device"], seg.device_addr() == seg.base_addr())
    t = seg.tensors("kv")
    t[2].fill_(1.5)
    print("vmm-data", float(seg.tensors("kv")[2].sum()) == 1.5 * 64 * 576)
with create_shared_segment("py-cuda-reg", blocks, pages="base", host_register=True) as seg:
    info = seg.info
    print("reg", info["backend"], info["registered_chunks"],
          seg.device_addr() == seg.base_addr())
with create_shared_segment("py-plain", blocks, pages="base") as seg:
    print("plain", seg.device_addr())
'''


def fake_driver():
    return built("libsseg_fake_cuda.so", "the fake CUDA driver")


def test_vmm_segment_and_host_registration_through_the_fake_driver():
    env = env_with_package(SHAREDSEG_CUDA_LIBRARY=fake_driver(), SSEG_FAKE_CUDA="devices=2;numa=0,0")
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines == ["vmm cuda 1 True", "vmm-data True", "reg memfd 1 True", "plain None"], \
        run.stdout + run.stderr


QUIESCE = '''
import torch
from sharedseg import create_shared_segment

# torch's CUDA as a process that copies to the GPU sees it (the fake driver
# serves the library; torch here is told it initialised CUDA on device 0).
synced = []
torch.cuda.is_initialized = lambda: True
torch.cuda.current_device = lambda: 0

def synchronize(device):
    with open("/proc/self/maps") as f:
        synced.append((device, "sseg:py-quiesce" in f.read()))

torch.cuda.synchronize = synchronize
blocks = {"kv": dict(count=2, shape=(64, 576), dtype=torch.bfloat16)}
seg = create_shared_segment("py-quiesce", blocks, pages="base", host_register=True,
                            device_id=1)
view = seg.tensors("kv")[1]
print("closed-now", seg.close())
print("synced-before-last-view", synced)
del view
print("synced", sorted(synced))
with create_shared_segment("py-quiesce-plain", blocks, pages="base") as plain:
    pass
print("plain-synced", len(synced))
'''


def test_the_device_is_synchronised_before_a_registered_segment_goes():
    env = env_with_package(SHAREDSEG_CUDA_LIBRARY=fake_driver(), SSEG_FAKE_CUDA="devices=2;numa=0,0")
    run = subprocess.run([sys.executable, "-c", QUIESCE], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines["closed-now"] == "False"  # the view holds the pages
    assert lines["synced-before-last-view"] == "[]"
    # The segment's device and torch's current one, while still mapped.
    assert lines["synced"] == "[(0, True), (1, True)]", lines
    assert lines["plain-synced"] == "2"  # a memfd segment without registration: nothing


LOADS = '''
from sharedseg import _backends, _protocol

def loaded():
    return "libsseg_fake_cuda" in open("/proc/self/maps").read()

# owner_rank on another host with a memfd backend named: each host's lowest
# rank owns, and deciding so loads no CUDA driver.
print("memfd-owner", _protocol._owner(0, [b"a" * 32, b"b" * 32], 2, 1, "memfd"))
print("memfd-loaded", loaded())
print("cuda-pinned", _backends.is_device_backend("cuda"))
print("cuda-loaded", loaded())
'''


def test_a_named_memfd_backend_loads_no_device_driver():
    env = env_with_package(SHAREDSEG_CUDA_LIBRARY=fake_driver(), SSEG_FAKE_CUDA="devices=2;numa=0,0")
    run = subprocess.run([sys.executable, "-c", LOADS], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines == {"memfd-owner": "1", "memfd-loaded": "False", "cuda-pinned": "True",
                     "cuda-loaded": "True"}, lines


AUTO_PIN = '''
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="log %(levelname)s %(message)s")
from sharedseg.engines import base
request = base.SegmentRequest.parse({"pages": "auto"}, "test").on("cuda")
print("request", request.pin, request.backend, request.fallback)
with base.create("py-auto-pin", request, size=4 << 20) as seg:
    info = seg.info
    print("made", info["backend"], info["pinned"], info.get("registered_chunks", 0) > 0)
'''


def auto_pin(fake, fail=""):
    env = env_with_package(SHAREDSEG_CUDA_LIBRARY=fake_driver(), SSEG_FAKE_CUDA=fake,
                           SSEG_FAKE_CUDA_FAIL=fail)
    run = subprocess.run([sys.executable, "-c", AUTO_PIN], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout.splitlines()


def test_pin_auto_is_vmm_memory_where_the_probe_says_it_works():
    """Pinned once for the group: the cuda backend's VMM host memory, which
    peers import already pinned, not a registration by every rank."""
    lines = auto_pin("devices=2;numa=0,0")
    assert "log INFO sharedseg: pin auto is vmm: the cuda backend's VMM host memory works " \
           "here (the probe)" in lines
    assert "request vmm cuda True" in lines
    assert lines[-1] == "made cuda True False"


def test_pin_auto_registers_where_vmm_host_memory_does_not_work():
    lines = auto_pin("devices=2;numa=0,0;host_numa_vmm=0")
    pin = next(line for line in lines if line.startswith("log INFO sharedseg: pin auto"))
    assert pin.startswith("log INFO sharedseg: pin auto is host_register: VMM host memory "
                          "does not work here: ")
    assert "request host_register None False" in lines
    assert lines[-1] == "made memfd True True"


def test_pin_auto_falls_back_to_registration_when_the_vmm_create_fails():
    """The probe passed, the segment's own cuMemCreate is refused: the
    group creates again with registration, warning, instead of failing."""
    lines = auto_pin("devices=2;numa=0,0", fail="cuMemCreate:2-:CUDA_ERROR_OUT_OF_MEMORY")
    warn = next(line for line in lines if line.startswith("log WARNING"))
    assert warn.startswith("log WARNING sharedseg: segment 'py-auto-pin': VMM host memory "
                           "failed (")
    assert warn.endswith("registering the memfd mapping for DMA instead (pin auto)")
    assert lines[-1] == "made memfd True True"
