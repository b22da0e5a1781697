# SPDX-License-Identifier: Apache-2.0
"""sharedseg.vllm's region and vLLM's own pinning (issue 30's two real
bugs' first): vLLM's pin_mmap_region, run on our region as vLLM's
CPUOffloadingWorker runs it, registers nothing where sharedseg pinned the
segment (through the fake CUDA driver), and registers our mapping where it
did not (pin none); then the region's cleanup undoes those registrations
before the segment is unmapped. vLLM's host_register/host_unregister are
replaced by recorders: on a CPU host vLLM's CUDA runtime is absent."""
import json
import subprocess
import sys

import pytest

from conftest import built, env_with_package
from sharedseg.vllm import ENGINE

pytestmark = pytest.mark.engine

SCRIPT = '''
import json, sys
from vllm.v1.kv_offload.cpu import gpu_worker
import sharedseg.vllm as adapter
from sharedseg.engines.base import PINNING_PLATFORM, SegmentRequest

calls = []
gpu_worker.host_register = lambda ptr, size: calls.append(("register", ptr, size)) or True
def unregister(ptr):
    calls.append(("unregister", ptr, region._base is not None and not region.segment.closed))
adapter.ENGINE._found["vllm.v1.kv_offload.cpu.host_register.host_unregister"] = unregister

def run(case):
    pin, _, slots = case.partition(":")
    platform = PINNING_PLATFORM if pin != "none" else "cpu"
    request = SegmentRequest(pages="base", pin=pin).on(platform)
    global region
    # slots: 0.33's worker pins only this rank's slot of each row where that
    # saves 3 MiB a row (pin_mmap_region(worker_slot_only=True))
    row = 8192 + (4 << 20 if slots else 0)
    region = adapter.SharedSegRegion(name="vllm-pin-" + pin + slots, group=None,
                                     num_chunks=2 if slots else 4, row_stride=row, slot=0,
                                     slot_bytes=8192, request=request)
    base = region._base.data_ptr()
    pinned_by_us = region.is_pinned
    calls.clear()
    if slots:
        gpu_worker.pin_mmap_region(region, worker_slot_only=True)
    else:
        gpu_worker.pin_mmap_region(region)
    seen = dict(pinned_by_us=pinned_by_us, pinned=region.is_pinned,
                addresses=[a - base for a in region.pinned_addresses],
                registered=[[c[0], c[1] - base, c[2]] for c in calls])
    region.cleanup()
    seen["after"] = [[c[0], c[1] - base, c[2]] for c in calls[len(seen["registered"]):]]
    return seen


print(json.dumps({case: run(case) for case in sys.argv[1:]}))
'''


@pytest.fixture(scope="module")
def pin_runs():
    """Both pins in one interpreter (it imports vLLM: seconds of CPU), over
    the fake CUDA driver; with pin none the library pins nothing."""
    env = env_with_package(SHAREDSEG_CUDA_LIBRARY=built("libsseg_fake_cuda.so",
                                                        "the fake CUDA driver"),
                           SSEG_FAKE_CUDA="devices=1;numa=0")
    cases = ["host_register", "none"]
    if ENGINE.release() != "0.32":  # 0.32's pin has no worker_slot_only
        cases += ["host_register:slots", "none:slots"]
    run = subprocess.run([sys.executable, "-c", SCRIPT, *cases], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1])


def test_vllms_pin_registers_nothing_in_a_region_sharedseg_pinned(pin_runs):
    seen = pin_runs["host_register"]
    assert seen["pinned_by_us"] and seen["pinned"]
    assert seen["registered"] == [] and seen["addresses"] == []
    assert seen["after"] == []  # the segment's own registration goes with the segment


def test_cleanup_undoes_vllms_registrations_before_unmapping(pin_runs):
    seen = pin_runs["none"]
    assert not seen["pinned_by_us"] and seen["pinned"]
    assert seen["registered"] == [["register", 0, 4 * 8192]] and seen["addresses"] == [0]
    # Unregistered while the mapping is still there, once each.
    assert seen["after"] == [["unregister", 0, True]]


def test_vllms_slot_pin_registers_nothing_in_a_region_sharedseg_pinned(pin_runs):
    """0.33's worker pins only its slot of every row (worker_slot_only,
    through iter_worker_slot_ranges, where that saves 3 MiB a row): nothing
    where sharedseg pinned the segment; vLLM's slots, undone by cleanup,
    where it did not."""
    if ENGINE.release() == "0.32":  # its pin registers the whole region only: nothing more
        import inspect

        from vllm.v1.kv_offload.cpu import gpu_worker
        assert "worker_slot_only" not in inspect.signature(gpu_worker.pin_mmap_region).parameters
        return
    seen = pin_runs["host_register:slots"]
    assert seen["pinned_by_us"] and seen["pinned"]
    assert seen["registered"] == [] and seen["addresses"] == [] and seen["after"] == []
    seen = pin_runs["none:slots"]
    row = 8192 + (4 << 20)
    assert not seen["pinned_by_us"] and seen["pinned"]
    assert seen["registered"] == [["register", 0, 8192], ["register", row, 8192]]
    assert seen["after"] == [["unregister", row, True], ["unregister", 0, True]]
