# SPDX-License-Identifier: Apache-2.0
"""Host memory the way the bench driver counts it (hostmem.c), for the Python
mechanisms: Shmem + AnonPages + HugeTLB pages in use + PageTables, a
process's own page tables, and the page kind a buffer obtained (smaps)."""
import glob
import time

POOLS = "/sys/kernel/mm/hugepages"
FIELDS = ("Shmem", "AnonPages", "PageTables")


def _read_int(path):
    try:
        with open(path) as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0


def hugetlb_in_use(pools=POOLS):
    """Bytes of HugeTLB pages in use, every pool: nr_hugepages less
    free_hugepages, as sseg_os_hugetlb_in_use (src/os/hugetlb_use.c) counts
    them. nr_hugepages (HugePages_Total) counts the surplus pages already."""
    total = 0
    for pool in glob.glob(f"{pools}/hugepages-*kB"):
        kb = int(pool.rsplit("-", 1)[1][:-2])
        pages = _read_int(f"{pool}/nr_hugepages") - _read_int(f"{pool}/free_hugepages")
        total += max(0, pages) * kb * 1024
    return total


def read():
    out = dict(HugeTLB=hugetlb_in_use())
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in FIELDS:
                out[key] = int(rest.split()[0]) * 1024
    return out


def total(m):
    return sum(m.values())


def own_page_tables():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmPTE:"):
                return int(line.split()[1]) * 1024
    return 0


def smaps_read_cost():
    """(seconds to read /proc/self/smaps once, VMAs in it): what a check of
    the page kind through smaps costs this process."""
    t0 = time.monotonic()
    with open("/proc/self/smaps") as f:
        text = f.read()
    return time.monotonic() - t0, text.count("\nVmFlags:")


def _smaps_fields(lo, hi):
    sums = dict(Rss=0, huge=0, hugetlb=0, page=0)
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start < hi and end > lo
                continue
            if not inside or not line.rstrip().endswith(" kB"):
                continue
            kb = int(line.split()[1]) * 1024
            if head == "Rss:":
                sums["Rss"] += kb
            elif head in ("AnonHugePages:", "ShmemPmdMapped:", "FilePmdMapped:"):
                sums["huge"] += kb
            elif head in ("Shared_Hugetlb:", "Private_Hugetlb:"):
                sums["hugetlb"] += kb
            elif head == "KernelPageSize:":
                sums["page"] = max(sums["page"], kb)
    return sums


def pages_obtained(buf):
    """("hugetlb-2M" | "thp" | "base" | "mixed" | "unverified", huge fraction)"""
    import numpy
    view = numpy.frombuffer(buf, dtype=numpy.uint8)
    s = _smaps_fields(view.ctypes.data, view.ctypes.data + view.nbytes)
    if s["hugetlb"] or s["page"] > 4096:
        return ("hugetlb-1G" if s["page"] >= 1 << 30 else "hugetlb-2M"), 1.0
    if not s["Rss"]:
        return "unverified", 0.0
    frac = s["huge"] / s["Rss"]
    return ("thp" if frac >= 0.99 else "base" if frac < 0.01 else "mixed"), frac
