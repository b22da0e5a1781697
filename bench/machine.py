# SPDX-License-Identifier: Apache-2.0
"""What the report says about the machine, and the host's knobs and memory
as the bench reads them."""
import glob
import os
import platform
import re
import shutil
import subprocess

THP = "/sys/kernel/mm/transparent_hugepage"
SHMEM_ENABLED = f"{THP}/shmem_enabled"
THP_ENABLED = f"{THP}/enabled"
NR_HUGEPAGES = "/proc/sys/vm/nr_hugepages"
POOL_2M = "/sys/kernel/mm/hugepages/hugepages-2048kB"
POOL_SLACK = 8  # pages beyond a case's need: rounding, the staging rings
GIB = 1 << 30


def knob(path):
    """The selected value of a sysfs knob ("always [madvise] never" ->
    "madvise"), or the file's text; "" when it cannot be read."""
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return ""
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            out[key] = int(rest.split()[0]) * (1024 if rest.strip().endswith("kB") else 1)
    return out


def mem_available():
    return meminfo()["MemAvailable"]


def mem_used():
    m = meminfo()
    return m["MemTotal"] - m["MemAvailable"]


def hugetlb_free():
    try:
        with open(f"{POOL_2M}/free_hugepages") as f:
            return int(f.read())
    except OSError:
        return 0


def _cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _detect(flag):
    if not shutil.which("systemd-detect-virt"):
        return "none"
    p = subprocess.run(["systemd-detect-virt", flag], capture_output=True, text=True)
    return p.stdout.strip() or "none"


def _virtualization():
    """"kvm", "a virtual machine (hypervisor flag)", ..., "none found"; and
    the container, when there is one."""
    vm = _detect("--vm")
    if vm == "none":
        with open("/proc/cpuinfo") as f:
            vm = "a virtual machine (hypervisor flag)" if " hypervisor" in f.read() \
                else "none found"
    container = _detect("--container")
    return vm if container == "none" else f"{vm}; container: {container}"


def _devshm():
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[1] == "/dev/shm":
                return f"{fields[2]} {fields[3]}"
    return "not mounted"


def _perf_hardware_counters():
    """Whether perf can count cycles here (a VM often exposes no PMU)."""
    if not shutil.which("perf"):
        return "perf not installed"
    p = subprocess.run(["perf", "stat", "-x,", "-e", "cycles", "true"],
                       capture_output=True, text=True)
    return "no (cycles: not supported)" if "not supported" in p.stderr or p.returncode \
        else "yes"


def _balloon():
    """Whether a virtio balloon is bound: with free page reporting it hands
    freed memory back to the host, and a later first touch waits on it."""
    bound = glob.glob("/sys/bus/virtio/drivers/virtio_balloon/virtio*")
    return "virtio_balloon bound" if bound else "none"


def facts():
    m = meminfo()
    return dict(
        cpu=_cpu_model(), cores=os.cpu_count(), memory_bytes=m["MemTotal"],
        mem_available_bytes=m["MemAvailable"], kernel=platform.release(),
        virtualization=_virtualization(), devshm=_devshm(),
        python=platform.python_version(), root=os.geteuid() == 0,
        perf_hardware_counters=_perf_hardware_counters(), balloon=_balloon(),
        knobs=dict(shmem_enabled=knob(SHMEM_ENABLED),
                   shmem_enabled_2M=knob(f"{THP}/hugepages-2048kB/shmem_enabled"),
                   thp_enabled=knob(THP_ENABLED), thp_defrag=knob(f"{THP}/defrag"),
                   nr_hugepages=knob(NR_HUGEPAGES),
                   hugetlb_free_2M=knob(f"{POOL_2M}/free_hugepages")),
    )


def remove_leftovers():
    """Named files a killed devshm case or vLLM region left in /dev/shm:
    the recipe's weakness, not to be left on the machine."""
    for path in glob.glob("/dev/shm/sseg-bench-*") + glob.glob(
            "/dev/shm/vllm_offload_sseg-bench-*"):
        try:
            os.unlink(path)
        except OSError:
            pass
