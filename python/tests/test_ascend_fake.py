# SPDX-License-Identifier: Apache-2.0
"""The ascend backend from Python, through the project's fake ACL runtime
(the C build's libsseg_fake_acl.so): create_shared_segment(...,
backend="ascend"), and (..., mmap=False) where no CUDA driver is, with 4
gloo ranks, each its own process (the ACL
reference forbids importing a handle in the process that exported it), on
the in-server handle whose trust list the owner extends with each peer.
Untested on an NPU."""
import json
import os
import traceback

import gloo_ranks
from conftest import built, free_port

WORLD = 4


def fake_runtime():
    return built("libsseg_fake_acl.so", "the fake ACL runtime")


# How each test asks for the ascend backend.
ASKS = {"backend": dict(backend="ascend"), "mmap": dict(mmap=False)}


def share(rank, world, group, ask):
    import torch
    import torch.distributed as dist
    from sharedseg import create_shared_segment

    seg = create_shared_segment(
        f"py-ascend-{ask}", {"kv": dict(count=world, shape=(64, 576), dtype=torch.bfloat16)},
        world_size=world, rank_id=rank, comm_group=group, device_id=rank % 2, **ASKS[ask])
    kv = seg.tensors("kv")
    kv[rank].fill_(rank + 1)
    dist.barrier(group)
    facts = seg.info
    seen = dict(seen=[bool(kv[r].eq(r + 1).all()) for r in range(world)],
                backend=facts["backend"], handle_type=facts["handle_type"],
                device=facts["device"], owner=facts["owner_rank"],
                device_addr_is_base=seg.device_addr() == seg.base_addr())
    dist.barrier(group)
    del kv
    seg.close()
    return seen


def rank_main(rank, world, port, outdir, runtime, ask):
    # Read by the library at its first use of ACL (of CUDA), in this process.
    os.environ["SHAREDSEG_ACL_LIBRARY"] = runtime
    os.environ["SSEG_FAKE_ACL"] = "devices=2"
    os.environ["SHAREDSEG_CUDA_LIBRARY"] = "/nonexistent/libcuda.so.1"
    import torch.distributed as dist

    group = gloo_ranks.init_gloo(rank, world, port)
    try:
        result = dict(ok=True, data=share(rank, world, group, ask))
    except Exception:
        result = dict(ok=False, error=traceback.format_exc())
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


def four_ranks_share(tmp_path, ask):
    gloo_ranks.spawn(rank_main, WORLD, (WORLD, free_port(), str(tmp_path), fake_runtime(), ask),
                     timeout=150)
    for r in range(WORLD):
        res = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert res["ok"], f"rank {r}:\n{res['error']}"
        d = res["data"]
        assert d["seen"] == [True] * WORLD, f"rank {r} saw {d['seen']}"
        assert d["backend"] == "ascend" and d["handle_type"] == "acl-trustlist"
        assert d["device"] == r % 2 and d["owner"] == 0 and d["device_addr_is_base"]


def test_four_gloo_ranks_share_an_ascend_segment_through_the_fake_runtime(tmp_path):
    four_ranks_share(tmp_path, "backend")


def test_mmap_false_with_four_gloo_ranks_is_ascend_where_no_cuda_driver_is(tmp_path):
    four_ranks_share(tmp_path, "mmap")


def test_mmap_false_takes_ascend_where_cuda_is_absent():
    """mmap=False asks for a device backend's VMM memory: CUDA's, or
    Ascend's where an Ascend runtime is present and CUDA is not (each in a
    fresh interpreter: a driver is loaded once per process)."""
    import subprocess
    import sys

    from conftest import env_with_package

    code = "from sharedseg._backends import vmm_backend; print(vmm_backend(None))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=env_with_package(
                             SHAREDSEG_ACL_LIBRARY=fake_runtime(),
                             SHAREDSEG_CUDA_LIBRARY="/nonexistent/libcuda.so.1"))
    assert run.stdout.strip() == "ascend", run.stdout + run.stderr
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=env_with_package(
                             SHAREDSEG_ACL_LIBRARY="/nonexistent/libascendcl.so",
                             SHAREDSEG_CUDA_LIBRARY="/nonexistent/libcuda.so.1"))
    assert run.stdout.strip() == "cuda", run.stdout + run.stderr


NPU_QUIESCE = '''
import types
import torch
from sharedseg import create_shared_segment

# torch_npu's torch.npu as a process that copies to the NPU sees it (the
# fake runtime serves the library; torch here has an initialised NPU 0).
synced = []

def synchronize(device):
    with open("/proc/self/maps") as f:
        synced.append((device, "sseg-tag:py-npu-quiesce" in f.read()))

torch.npu = types.SimpleNamespace(is_initialized=lambda: True, current_device=lambda: 0,
                                  synchronize=synchronize)
blocks = {"kv": dict(count=2, shape=(64, 576), dtype=torch.bfloat16)}
seg = create_shared_segment("py-npu-quiesce", blocks, backend="ascend", device_id=1)
view = seg.tensors("kv")[1]
print("closed-now", seg.close())
print("synced-before-last-view", synced)
del view
print("synced", sorted(synced))
'''


def test_the_npu_is_synchronised_before_an_ascend_segment_goes():
    """A pinned ascend segment's pages go only after torch.npu (torch_npu)
    synchronised the segment's device and the current one, as torch.cuda
    does for the cuda backend."""
    import subprocess
    import sys

    from conftest import env_with_package

    run = subprocess.run([sys.executable, "-c", NPU_QUIESCE], capture_output=True, text=True,
                         timeout=120, env=env_with_package(
                             SHAREDSEG_ACL_LIBRARY=fake_runtime(), SSEG_FAKE_ACL="devices=2",
                             SHAREDSEG_CUDA_LIBRARY="/nonexistent/libcuda.so.1"))
    assert run.returncode == 0, run.stdout + run.stderr
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines["closed-now"] == "False"  # the view holds the pages
    assert lines["synced-before-last-view"] == "[]"
    # Both devices, while the segment (its tag page) was still mapped.
    assert lines["synced"] == "[(0, True), (1, True)]", lines


PCIE = '''
import json
import sharedseg
from sharedseg._backends import is_device_backend, vmm_backend
facts = sharedseg.probe()["backends"]["ascend"]
ok, why = sharedseg.supported("ascend")
print(json.dumps(dict(available=facts["available"], reason=facts["reason"], supported=ok,
                      why=why, device=is_device_backend("ascend"), vmm=vmm_backend(None))))
'''


def test_npus_on_pcie_are_not_available_and_mmap_false_says_why():
    """NPUs attached over PCIe cannot map ACL VMM host memory (HCCS only):
    probe() and supported() say the backend is not available and what
    serves such NPUs; it stays a device backend, and mmap=False still
    picks it where no CUDA driver is, so that its create names the link,
    not a missing CUDA driver."""
    import subprocess
    import sys

    from conftest import env_with_package

    run = subprocess.run([sys.executable, "-c", PCIE], capture_output=True, text=True,
                         timeout=60, env=env_with_package(
                             SHAREDSEG_ACL_LIBRARY=fake_runtime(),
                             SSEG_FAKE_ACL="devices=2;hccs=0",
                             SHAREDSEG_CUDA_LIBRARY="/nonexistent/libcuda.so.1"))
    assert run.returncode == 0, run.stdout + run.stderr
    got = json.loads(run.stdout)
    assert got["available"] is False and got["supported"] is False, got
    for text in (got["reason"], got["why"]):
        assert "over HCCS only, not PCIe" in text and "SSEG_F_HOST_REGISTER" in text, got
    assert got["device"] is True and got["vmm"] == "ascend", got
