# SPDX-License-Identifier: Apache-2.0
"""The cases `make bench` runs: quick (a few minutes, fits a 24 GiB, 2-core
machine) or full (--full: every size and group size the machine can hold)."""
import sys

MIB, GIB = 1 << 20, 1 << 30
PAGE_2M = 2 * MIB
RING = 64 * MIB  # the staging ring of the gather (the driver's bandwidth.c)

# Which mechanism can be asked for which page kind: /dev/shm is tmpfs (no
# HugeTLB), the prior design's recipe only ever asks for THP.
C_MECHANISMS = {
    "hugetlb-2M": ["sharedseg", "private"],
    "thp": ["sharedseg", "private", "devshm", "procfd"],
    "base": ["sharedseg", "private", "devshm"],
}
KINDS = list(C_MECHANISMS)
PY_MECHANISMS = ["sharedseg-py", "private-torch", "torch-share-memory", "mp-shared-memory"]

QUICK = dict(
    reps=3,
    # (size, group sizes, page kinds, mechanisms; None: every one)
    scaling=[(256 * MIB, [1, 2, 4, 8], KINDS, None), (GIB, [8], KINDS, None),
             (4 * GIB, [8], ["hugetlb-2M", "thp"], ["sharedseg", "procfd"])],
    populate=[(GIB, [2, 8])],
    # populate=background against the foreground and /dev/shm, as large as fits
    background=[(GIB, [1, 2, 8]), (8 * GIB, [8])],
    bandwidth=[GIB],
    limits=[GIB],
    python=[(256 * MIB, [2, 8])],
    # Mooncake's own shared segment against ours: (size, group sizes)
    mooncake=[(256 * MIB, [2, 4, 8]), (GIB, [2, 8]), (4 * GIB, [8])],
    # vLLM's own region against ours: (sizes, group sizes); one copy each
    vllm=([GIB, 4 * GIB], [2, 4, 8]),
    # the host pool: (chunk size, most processes at once, SIGKILL rounds)
    pool=(256 * 1024, 8, 10000),
    # SGLang's Mooncake tier: (TP sizes, prefix sizes in pages of 36 KiB)
    sglang_mooncake=([2, 4], [64, 512]),
)
FULL = dict(
    reps=5,
    scaling=[(s, [1, 2, 4, 8], KINDS, None) for s in (256 * MIB, GIB, 4 * GIB, 8 * GIB)],
    populate=[(GIB, [2, 4, 8]), (4 * GIB, [2, 4, 8])],
    background=[(GIB, [1, 2, 4, 8]), (4 * GIB, [2, 4, 8]), (8 * GIB, [1, 2, 4, 8])],
    bandwidth=[GIB, 4 * GIB],
    limits=[GIB, 4 * GIB],
    python=[(256 * MIB, [2, 4, 8]), (GIB, [2, 4, 8])],
    mooncake=[(s, [2, 4, 8]) for s in (256 * MIB, GIB, 4 * GIB)],
    vllm=([GIB, 4 * GIB, 8 * GIB], [2, 4, 8]),
    pool=(256 * 1024, 8, 10000),
    sglang_mooncake=([2, 4, 8], [64, 512, 2048]),
)
# sseg populate modes: (populate, owner threads); the scaling cases use the
# library's default threads (up to 4, bounded by the CPUs)
POPULATE_MODES = [("owner", 1), ("owner", 2), ("spread", 0), ("lazy", 0)]


class Case:
    """One run of the C driver or of pybench.py: its arguments, the memory
    it needs, the knobs it wants, and keys added to its rows."""

    def __init__(self, section, runner, args, pages, memory, shmem="advise", timeout=600):
        self.section = section
        self.runner = runner
        self.args = [str(a) for a in args]
        self.pages = pages
        self.memory = memory
        self.hugetlb_pages = -(-memory // PAGE_2M) if pages == "hugetlb-2M" else 0
        self.shmem = shmem
        self.timeout = timeout
        self.extra = dict(section=section)
        if shmem != "advise":
            self.extra["shmem_enabled"] = shmem
        self.title = f"{section}: {' '.join(self.args[1:] if runner == 'c' else self.args)}"

    def command(self, env):
        if self.runner == "c":
            return env["driver"] + self.args
        if self.runner == "vllm":
            return [env["vllm_python"], env["vllmbench"]] + self.args
        if self.runner == "mooncake":  # the engines' environment, which has Mooncake
            return [env["vllm_python"], env["pybench"]] + self.args
        if self.runner == "sglang_mooncake":  # the engines' environment: SGLang, Mooncake
            return [env["vllm_python"], env["sglang_mooncake"]] + self.args
        if self.runner == "kills":  # the pool's attack test, its rounds raised
            return ["env", f"SSEG_POOL_KILLS={self.args[0]}",
                    f"SSEG_CASE_TIMEOUT_MS={self.timeout * 1000}", env["pool_attack"],
                    "killed at random"]
        return [env["python"], env["pybench"]] + self.args


def _c_case(section, mech, ranks, size, pages, reps, *more, shmem="advise"):
    # private: a buffer a rank; shared: the segment, and the private buffer
    # the first peer's first read is set against
    copies = ranks if mech == "private" else 1 if ranks == 1 or "none" in more else 2
    memory = size * copies
    if "--bandwidth" in more:
        memory = 3 * size + 2 * RING
    args = ["case", "--mechanism", mech, "--ranks", ranks, "--size", size, "--pages", pages,
            "--reps", reps, "--warmup", 1] + list(more)
    return Case(section, "c", args, pages, memory, shmem=shmem)


def _scaling(m):
    for size, group_sizes, kinds, only in m["scaling"]:
        for pages in kinds:
            mechs = [x for x in C_MECHANISMS[pages] if only is None or x in only]
            for ranks in group_sizes:
                for mech in mechs:
                    yield _c_case("scaling", mech, ranks, size, pages, m["reps"])


def _populate(m):
    for size, group_sizes in m["populate"]:
        for pages in KINDS:
            for ranks in group_sizes:
                for mode, threads in POPULATE_MODES:
                    yield _c_case("populate", "sharedseg", ranks, size, pages, m["reps"],
                                  "--populate", mode, "--threads", threads, "--touch", "none")


def _background(m):
    """Usable and resident: background against the owner's foreground
    population (2 threads) and the /dev/shm recipe, and the reader's read as
    soon as it may (during the work, or after the owner populated)."""
    for size in sorted({s for s, _ in m["background"]}):
        yield Case("background", "c", ["alternatives", "--size", size, "--reps", m["reps"]],
                   "base", size)
    for size, group_sizes in m["background"]:
        for pages in KINDS:
            for ranks in group_sizes:
                for mode, threads in (("background", 0), ("owner", 2)):
                    more = ["--populate", mode, "--threads", threads, "--touch", "none"]
                    if ranks > 1:
                        more.append("--read-during")
                    yield _c_case("background", "sharedseg", ranks, size, pages, m["reps"],
                                  *more)
                yield _c_case("background", "sharedseg", ranks, size, pages, m["reps"],
                              "--populate", "lazy", "--touch", "none")
                if "devshm" in C_MECHANISMS[pages]:
                    yield _c_case("background", "devshm", ranks, size, pages, m["reps"],
                                  "--touch", "none")


def _bandwidth(m):
    for size in m["bandwidth"]:
        for pages in KINDS:
            for mech in C_MECHANISMS[pages]:
                if mech != "private":
                    yield _c_case("bandwidth", mech, 2, size, pages, m["reps"], "--bandwidth")


def _limits(m):
    for size in m["limits"]:
        for pages in KINDS:
            yield Case("limits", "c", ["limits", "--size", size, "--pages", pages,
                                       "--reps", m["reps"]], pages, 2 * size)


def _retouch(m):
    """First touch of memory freed a moment ago and 3 s ago (a balloon that
    reports free pages hands them back to the host in between)."""
    for pages in ("thp", "base"):
        yield Case("limits", "c", ["retouch", "--size", 512 * MIB, "--pages", pages,
                                   "--reps", m["reps"]], pages, 512 * MIB)


def _knob_default(m):
    """The prior design's recipe under the kernel's default shmem_enabled."""
    yield _c_case("knob_default", "procfd", 2, GIB, "thp", m["reps"], shmem="never")


def _python(m):
    for size, group_sizes in m["python"]:
        for ranks in group_sizes:
            args = ["--ranks", ranks, "--size", size, "--reps", m["reps"], "--warmup", 1,
                    "--pages", ",".join(KINDS), "--mechanisms", ",".join(PY_MECHANISMS)]
            # private-torch holds ranks copies; the pool backs sharedseg-py's one
            c = Case("python", "py", args, "hugetlb-2M", ranks * size, timeout=900)
            c.hugetlb_pages = size // PAGE_2M
            yield c


def _mooncake(m):
    """Mooncake's create_shared_segment and ours, the same call on the
    engines' interpreter: ours on every page kind, Mooncake's on the one it
    takes (/dev/shm), each shown with what it obtained."""
    for size, group_sizes in m["mooncake"]:
        for ranks in group_sizes:
            args = ["--ranks", ranks, "--size", size, "--reps", m["reps"], "--warmup", 1,
                    "--pages", ",".join(KINDS), "--mechanisms", "sharedseg-py,mooncake",
                    "--section", "mooncake"]
            # one segment at a time, beside the pool that backs ours on HugeTLB
            c = Case("mooncake", "mooncake", args, "hugetlb-2M", 2 * size, timeout=900)
            c.hugetlb_pages = size // PAGE_2M
            yield c


def _vllm(m):
    """vLLM's SharedOffloadRegion (a /dev/shm file: 4 KiB pages whatever the
    knobs) and ours on every page kind, in turn in one case; then both in a
    container-sized /dev/shm."""
    sizes, group_sizes = m["vllm"]
    args = ["--ranks", ",".join(map(str, group_sizes)), "--sizes", ",".join(map(str, sizes)),
            "--pages", ",".join(KINDS), "--reps", m["reps"], "--warmup", 1]
    # one region at a time; the pool backs ours on HugeTLB throughout
    c = Case("vllm", "vllm", args, "hugetlb-2M", 2 * max(sizes), timeout=1800)
    c.hugetlb_pages = -(-max(sizes) // PAGE_2M)
    yield c
    yield Case("vllm", "vllm", ["--devshm", "64m", "--ranks", 2, "--sizes", 256 * MIB], "auto",
               512 * MIB, timeout=300)


def _pool(m):
    """The host pool: lookups beside a server's round trip, copies beside
    memcpy (every page kind), reclaim after a kill; then the attack test's
    SIGKILL rounds, counting hits with another key's bytes."""
    chunk, procs, kills = m["pool"]
    for pages in KINDS:
        yield Case("pool", "c", ["pool", "--size", chunk, "--pages", pages, "--ranks", procs,
                                 "--reps", m["reps"]], pages, 2 * 64 * chunk + 64 * MIB)
    yield Case("pool", "kills", [kills], "base", 64 * MIB, timeout=1800)


def _sglang_mooncake(m):
    """SGLang's Mooncake tier as two hosts (network namespaces): a prefix
    prefetched by a TP group with and without the switch, time and bytes."""
    ranks, pages = m["sglang_mooncake"]
    # each rank of SGLang alone holds a pool of twice the largest prefix
    memory = max(ranks) * 2 * max(pages) * 36 * 1024 + max(ranks) * GIB
    yield Case("sglang_mooncake", "sglang_mooncake",
               ["--ranks", ",".join(map(str, ranks)), "--pages", ",".join(map(str, pages)),
                "--reps", m["reps"]], "auto", memory, timeout=1800)


SECTIONS = dict(scaling=_scaling, populate=_populate, background=_background,
                bandwidth=_bandwidth, limits=_limits,
                retouch=_retouch, knob_default=_knob_default, python=_python,
                mooncake=_mooncake, vllm=_vllm, pool=_pool, sglang_mooncake=_sglang_mooncake)


def build_matrix(full, facts, python=True, only=()):
    """Every case, those on HugeTLB pages first (the pool is grown once and
    given back after them), then THP, then base pages."""
    m = FULL if full else QUICK
    cases = []
    for name, make in SECTIONS.items():
        if (only and name not in only) or (
                name in ("python", "mooncake", "vllm", "sglang_mooncake") and not python):
            continue
        cases += list(make(m))
    order = {k: i for i, k in enumerate(KINDS)}
    cases.sort(key=lambda c: order.get(c.pages, len(KINDS)))
    return cases


if __name__ == "__main__":
    # python3 bench/matrix.py [--full]: the cases, their memory and pool
    cases = build_matrix("--full" in sys.argv, {})
    for c in cases:
        print(f"{c.memory / GIB:6.2f} GiB  pool {c.hugetlb_pages:5d}  {c.title}")
    print(f"{len(cases)} cases")
