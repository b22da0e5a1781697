# SPDX-License-Identifier: Apache-2.0
"""The targets the report checks, each against the rows of one run: what
was measured, the ratio, met or not, and for a miss what the run itself
measured about the reason."""
from rows import HUGE, one, select, size_text

FULLY_POPULATED = 0.99


class Verdict:
    def __init__(self, target, measured, met, why=None):
        self.target = target
        self.measured = measured  # one line, with the ratio
        self.met = met            # True, False, or None when not measured
        self.why = why or []      # lines, from measurements, when missed

    @property
    def word(self):
        return {True: "met", False: "**missed**", None: "not measured"}[self.met]


def _ratio_line(items):
    return "; ".join(items) if items else "no rows"


# ---- host memory ----

def memory_factor(rows):
    got = select(rows, bench="memory_factor", mechanism="sharedseg", ranks=8,
                 pages_obtained=HUGE, section="scaling")
    items, worst = [], None
    for r in sorted(got, key=lambda r: (r["pages_obtained"], r["size"])):
        priv = one(rows, bench="memory_factor", mechanism="private-malloc", ranks=8,
                   size=r["size"], pages_obtained=r["pages_obtained"])
        vs = f" (private buffers {priv['median']:.2f})" if priv else ""
        items.append(f"{r['median']:.3f} on {r['pages_obtained']}, {size_text(r['size'])}{vs}")
        worst = r if worst is None or r["median"] > worst["median"] else worst
    met = None if worst is None else worst["median"] <= 1.01
    why = []
    if met is False:
        tables = one(rows, bench="page_tables", mechanism="sharedseg", ranks=8,
                     size=worst["size"], pages_obtained=worst["pages_obtained"])
        why.append(f"{size_text(worst['size'])} on {worst['pages_obtained']}: factor "
                   f"{worst['min']:.3f}-{worst['max']:.3f} over {worst['reps']} repetitions, "
                   f"populated {worst.get('populated_fraction', 0):.3f} of the segment at "
                   f"ready")
        if tables:
            why.append(f"the ranks' own page tables: {tables['median'] / worst['size']:.4%} of "
                       f"the size; the host-wide PageTables moved by "
                       f"{tables.get('host_page_tables', 0) / worst['size']:.4%} (every "
                       f"process on the machine counts there)")
        priv = select(rows, bench="memory_factor", mechanism="private-malloc", section="scaling")
        if priv:
            off = max(abs(r[k] - r["ranks"]) for r in priv for k in ("min", "max"))
            why.append(f"the same host counters moved by up to {off:.3f} segments away from "
                       f"the exact count in the private buffers' repetitions (expected: one "
                       f"segment a rank): what other processes allocate and free between two "
                       f"samples lands in every figure")
    return Verdict("Memory factor at 8 ranks <= 1.01 with huge pages (private buffers: 8.0)",
                   _ratio_line(items), met, why)


def page_tables(rows):
    got = select(rows, bench="page_tables", mechanism="sharedseg", ranks=8, pages_obtained=HUGE,
                 section="scaling")
    base = select(rows, bench="page_tables", mechanism="sharedseg", ranks=8,
                  pages_obtained="base", section="scaling")
    items = [f"{r['fraction_of_size']:.4%} on {r['pages_obtained']}, {size_text(r['size'])}"
             for r in sorted(got, key=lambda r: (r["pages_obtained"], r["size"]))]
    items += [f"(4 KiB pages: {r['fraction_of_size']:.3%}, {size_text(r['size'])})" for r in base]
    met = None if not got else max(r["fraction_of_size"] for r in got) <= 0.001
    return Verdict("Page tables at 8 ranks on 2 MiB pages <= 0.1% of the segment",
                   _ratio_line(items), met)


# ---- setup ----

# sharedseg from C and through the Python package, each against what users
# of that language run today
BASELINES = {"sharedseg": ("private-malloc", "devshm-file", "memfd-procfd"),
             "sharedseg-py": ("private-torch", "torch-share-memory", "mp-shared-memory")}


def _populated(r):
    return r.get("populated_fraction", 0) >= FULLY_POPULATED


def _ready_pairs(rows):
    """(sharedseg's fastest fully populating row, the fastest baseline's) for
    every size, group size and obtained page kind that has both."""
    ready = [r for r in select(rows, bench="ready") if _populated(r)]
    for mech, baselines in BASELINES.items():
        keys = {(r["size"], r["ranks"], r["pages_obtained"]) for r in ready
                if r["mechanism"] in baselines}
        for size, ranks, kind in sorted(keys):
            key = dict(size=size, ranks=ranks, pages_obtained=kind)
            ours = select(ready, mechanism=mech, **key)
            theirs = select(ready, mechanism=baselines, **key)
            if ours and theirs:
                yield (min(ours, key=lambda r: r["median"]),
                       min(theirs, key=lambda r: r["median"]))


def _mode(r):
    return f"{r.get('populate', '?')}" + (f", {r['threads']:g} thread" if r.get("threads") else "")


def _host_line(rows, kind):
    later = one(rows, bench="first_touch", pages_requested=kind, idle_s=3)
    now = one(rows, bench="first_touch", pages_requested=kind, idle_s=0)
    if not later or not now:
        return ""
    return (f"a first touch of {kind} memory ran at {now['median']:.2f} GB/s when it was "
            f"freed a moment before and at {later['median']:.2f} GB/s when freed 3 s before")


def create(rows, limits):
    items, why, ratios, kinds = [], [], [], set()
    for ours, theirs in _ready_pairs(rows):
        ratio = ours["median"] / theirs["median"]
        ratios.append(ratio)
        items.append(f"{ratio:.2f}x {theirs['mechanism']} ({ours['pages_obtained']}, "
                     f"{size_text(ours['size'])}, {ours['ranks']} ranks"
                     f"{', Python' if ours['mechanism'] == 'sharedseg-py' else ''})")
        if ratio > 0.9:
            why.append(_create_why(rows, ours, theirs))
            kinds.add(ours["pages_obtained"])
    why += [_kind_line(rows, kind, limits) for kind in sorted(kinds)]
    met = None if not ratios else max(ratios) <= 0.9
    if ratios:
        items.insert(0, f"met in {sum(x <= 0.9 for x in ratios)} of {len(ratios)}")
    return Verdict("Create: time until every rank can use the segment <= 0.9x the fastest "
                   "baseline of the same page kind", _ratio_line(items), met, why)


def _create_why(rows, ours, theirs):
    kind = ours["pages_obtained"]
    if ours["mechanism"] == "sharedseg-py":
        return _python_why(rows, ours, theirs)
    line = (f"{size_text(ours['size'])}, {ours['ranks']} ranks, {kind}: "
            f"sharedseg (populate {_mode(ours)}) {ours['median'] * 1e3:.0f} ms against "
            f"{theirs['mechanism']} {theirs['median'] * 1e3:.0f} ms, both leaving every page "
            f"populated ({ours['populated_fraction']:.2f}, {theirs['populated_fraction']:.2f})")
    owner = one(rows, bench="owner_create", mechanism="sharedseg", size=ours["size"],
                ranks=ours["ranks"], pages_obtained=kind, populate=ours.get("populate"),
                threads=ours.get("threads"))
    if owner and owner["median"] > 0 and ours.get("populate") == "owner":
        line += _owner_line(owner)
    if ours.get("steal_s"):
        line += (f"; the hypervisor took {ours['steal_s'] * 1e3:.0f} ms of this machine's CPU "
                 f"time (steal) during sharedseg's setup")
    return line + _baseline_line(rows, theirs)


def _kind_line(rows, kind, limits):
    """What bounds population on one page kind, from this run's own rows."""
    line = f"{kind}, all sizes: "
    parts = []
    if limits.get(kind):
        parts.append(f"memset on populated {kind} memory runs at {limits[kind]:.1f} GB/s")
    parts += [p for p in (_threads_line(rows, kind), _host_line(rows, kind)) if p]
    return line + ("; ".join(parts) if parts else "no limit rows in this run")


def _python_why(rows, ours, theirs):
    attach = one(rows, bench="peer_attach", mechanism="sharedseg-py", size=ours["size"],
                 ranks=ours["ranks"], pages_obtained=ours["pages_obtained"])
    line = (f"Python, {size_text(ours['size'])}, {ours['ranks']} ranks, "
            f"{ours['pages_obtained']}: sharedseg-py {ours['median'] * 1e3:.0f} ms against "
            f"{theirs['mechanism']} {theirs['median'] * 1e3:.0f} ms")
    if attach and "smaps_read_ms" in attach:
        line += (f"; a peer's sseg_complete took {attach['median']:.0f} ms, and one read of its "
                 f"/proc/self/smaps ({attach.get('vmas', 0):.0f} mappings in a process that has "
                 f"imported torch) {attach['smaps_read_ms']:.0f} ms, against "
                 f"{_c_smaps(rows)}")
    return line


def _c_smaps(rows):
    got = [r for r in select(rows, bench="peer_attach", mechanism="sharedseg")
           if "smaps_read_ms" in r]
    if not got:
        return "no C figure in this run"
    r = min(got, key=lambda r: r["smaps_read_ms"])
    return (f"{r['smaps_read_ms']:.2f} ms ({r.get('vmas', 0):.0f} mappings) and a complete of "
            f"{r['median']:.2f} ms in the C driver")


def _owner_line(owner):
    """How sharedseg's owner spent its create."""
    cpu = owner.get("sys_s", 0) + owner.get("user_s", 0)
    return (f"; its owner populated at {owner['size'] / owner['median'] / 1e9:.2f} GB/s: "
            f"{owner['median'] * 1e3:.0f} ms of wall time, {cpu * 1e3:.0f} ms of CPU time over "
            f"its threads ({owner.get('sys_s', 0) * 1e3:.0f} ms in the kernel, "
            f"{owner.get('minor_faults', 0):.0f} faults), preempted "
            f"{owner.get('preempted', 0):.0f} times by other tasks")


def _baseline_line(rows, theirs):
    if theirs["mechanism"] == "devshm-file":
        return ("; the named file is populated slice by slice by every rank at once, the "
                "same work spread the same way as sharedseg's populate=spread")
    mate = one(rows, bench="owner_create", mechanism=theirs["mechanism"], size=theirs["size"],
               ranks=theirs["ranks"], pages_obtained=theirs["pages_obtained"])
    if not mate or mate["median"] <= 0:
        return ""
    return (f"; {theirs['mechanism']}'s owner populated at "
            f"{theirs['size'] / mate['median'] / 1e9:.2f} GB/s with one thread")


def _threads_line(rows, kind):
    """What a second population thread bought on this page kind (the
    populate section): near 1x means one core already fills the memory's
    write bandwidth."""
    got = {}
    for r in select(rows, bench="owner_create", mechanism="sharedseg", section="populate",
                    populate="owner", pages_obtained=kind):
        got.setdefault((r["size"], r["ranks"]), {})[r["threads"]] = r["median"]
    pairs = [(key, t) for key, t in got.items() if 1 in t and 2 in t]
    if not pairs:
        return ""
    (size, ranks), t = max(pairs)
    return (f"a second population thread made the owner {t[1] / t[2]:.2f}x as fast "
            f"({size_text(size)}, {ranks} ranks: {t[1] * 1e3:.0f} ms with 1 thread, "
            f"{t[2] * 1e3:.0f} ms with 2)")


def _cpu_line(sp, owner):
    if not sp.get("cpu_s_all_ranks") or not owner.get("cpu_s_all_ranks"):
        return ""
    return (f"; the ranks spent {sp['cpu_s_all_ranks'] * 1e3:.0f} ms of CPU time in all "
            f"populating their slices, the owner's 2 threads "
            f"{owner['cpu_s_all_ranks'] * 1e3:.0f} ms populating the whole")


def spread(rows, cores):
    items, why, ratios = [], [], []
    for sp in select(rows, bench="ready", mechanism="sharedseg", populate="spread",
                     section="populate"):
        if sp["ranks"] < 2:
            continue
        key = dict(bench="ready", mechanism="sharedseg", size=sp["size"], ranks=sp["ranks"],
                   pages_requested=sp["pages_requested"], section="populate", populate="owner")
        owners = {t: one(rows, threads=t, **key) for t in (1, 2)}
        if not all(owners.values()):
            continue
        ratio = sp["median"] / min(o["median"] for o in owners.values())
        ratios.append(ratio)
        items.append(f"{ratio:.2f}x the faster owner ({sp['pages_obtained']}, "
                     f"{size_text(sp['size'])}, {sp['ranks']} ranks)")
        if ratio >= 1:
            why.append(f"{sp['pages_obtained']}, {size_text(sp['size'])}, {sp['ranks']} ranks: "
                       f"spread {sp['median'] * 1e3:.0f} ms, owner with 1 thread "
                       f"{owners[1]['median'] * 1e3:.0f} ms, with 2 threads "
                       f"{owners[2]['median'] * 1e3:.0f} ms" + _cpu_line(sp, owners[2]))
    if why:
        why.append(f"this machine has {cores} cores: the ranks populating their slices at "
                   f"once share those {cores} cores, as the owner's 2 threads do; spread "
                   f"cannot use more CPUs than that, and pays one sseg_complete per rank")
    met = None if not ratios else max(ratios) < 1
    return Verdict("Spread populate with N >= 2 ranks faster than owner populate (1 or 2 "
                   "threads, the faster)",
                   _ratio_line(items), met, why)


def peer_complete(rows):
    got = select(rows, bench="peer_attach", mechanism="sharedseg", size=4 << 30,
                 pages_obtained=HUGE)
    items = [f"{r['median']:.2f} ms ({r['pages_obtained']}, {r['ranks']} ranks; max "
             f"{r['max']:.2f})" for r in got]
    met = None if not got else max(r["median"] for r in got) < 5
    why = []
    if met is False:
        for r in got:
            if r["median"] >= 5 and "smaps_read_ms" in r:
                why.append(f"{r['pages_obtained']}: one read of the peer's /proc/self/smaps "
                           f"({r.get('vmas', 0):.0f} mappings) took {r['smaps_read_ms']:.2f} ms "
                           f"in the same process")
    py = select(rows, bench="peer_attach", mechanism="sharedseg-py")
    if py:
        smaps = [r["smaps_read_ms"] for r in py if "smaps_read_ms" in r]
        items.append(f"through the Python package (any size, {min(r['ranks'] for r in py)}-"
                     f"{max(r['ranks'] for r in py)} ranks): {min(r['median'] for r in py):.0f}-"
                     f"{max(r['median'] for r in py):.0f} ms, where one read of the peer's "
                     f"/proc/self/smaps ({max(r.get('vmas', 0) for r in py):.0f} mappings with "
                     f"torch loaded) took {min(smaps):.0f}-{max(smaps):.0f} ms")
    return Verdict("Peer complete for 4 GiB on huge pages under 5 ms", _ratio_line(items), met,
                   why)


# ---- reads ----

def _pairs(rows, bench, **more):
    for ours in select(rows, bench=bench, mechanism="sharedseg", role=("peer", "owner"), **more):
        theirs = one(rows, bench=bench, role="private", pair=ours["role"],
                     paired_with="sharedseg", size=ours["size"],
                     pages_requested=ours["pages_requested"], block=ours.get("block"))
        if theirs:
            yield ours, theirs


def steady_read(rows):
    items, why, ratios = [], [], []
    for ours, theirs in _pairs(rows, "seq_read"):
        ratio = ours["median"] / theirs["median"]
        ratios.append(ratio)
        items.append(f"{ratio:.2f}x ({ours['pages_obtained']}, {size_text(ours['size'])})")
        if ratio < 0.95:
            why.append(f"{ours['pages_obtained']}, {ours['reps']} alternated repetitions: "
                       f"{_overlap(ours, theirs)}")
    met = None if not ratios else min(ratios) >= 0.95
    return Verdict("Peer read (sequential, page tables in place) >= 0.95x a private buffer of "
                   "the same page kind", _ratio_line(items), met, why)


def first_read(rows):
    items, why, ratios = [], [], []
    for ours in select(rows, bench="first_read", mechanism="sharedseg", role="peer",
                       section="scaling"):
        theirs = one(rows, bench="first_read", role="private", paired_with="sharedseg",
                     size=ours["size"], ranks=ours["ranks"],
                     pages_requested=ours["pages_requested"], section="scaling")
        if not theirs:
            continue
        ratio = ours["median"] / theirs["median"]
        ratios.append(ratio)
        items.append(f"{ratio:.2f}x ({ours['pages_obtained']}, {size_text(ours['size'])}, "
                     f"{ours['ranks']} ranks)")
        if ratio < 0.95:
            why.append(f"{ours['pages_obtained']}, {size_text(ours['size'])}, {ours['ranks']} "
                       f"ranks: the peer's first read took {ours.get('minor_faults', 0):.0f} "
                       f"minor faults and {ours.get('sys_s', 0) * 1e3:.0f} ms of kernel time "
                       f"mapping the owner's pages, of "
                       f"{ours['size'] / ours['median'] / 1e6:.0f} ms in all" +
                       (f"; its second read, the page tables in place, ran at "
                        f"{ours['second_read_gbps']:.2f} GB/s"
                        if ours.get("second_read_gbps") else "") +
                       f"; a private buffer's page tables are made while it is populated, "
                       f"so its first read has none of that. {_overlap(ours, theirs)}")
    met = None if not ratios else min(ratios) >= 0.95
    return Verdict("Peer first read (its page tables faulted in by the read) >= 0.95x the "
                   "first read of a private buffer the same rank has just populated",
                   _ratio_line(items), met, why)


def _overlap(ours, theirs):
    """What the repetitions say about a gap between two rows."""
    if ours["max"] >= theirs["min"]:
        return (f"The repetitions overlap ({ours['min']:.2f}-{ours['max']:.2f} against "
                f"{theirs['min']:.2f}-{theirs['max']:.2f} {ours['unit']}): the gap is within "
                f"this run's spread.")
    return (f"The repetitions do not overlap ({ours['min']:.2f}-{ours['max']:.2f} against "
            f"{theirs['min']:.2f}-{theirs['max']:.2f} {ours['unit']}).")


def _other_shared(rows, ours):
    """The same gather over the other shared mapping of this run (a tmpfs
    file, vLLM's recipe) on the same pages: whether a gap is sharedseg's or
    shared memory's."""
    for other in select(rows, bench="kv_gather", mechanism="devshm-file", role=ours["role"],
                        block=ours["block"], size=ours["size"],
                        pages_obtained=ours["pages_obtained"]):
        private = one(rows, bench="kv_gather", role="private", pair=other["role"],
                      paired_with="devshm-file", size=other["size"], block=other["block"],
                      pages_requested=other["pages_requested"])
        if private:
            return (f" The {ours['role']} of a /dev/shm file on the same "
                    f"{ours['pages_obtained']} pages gathers at {other['median']:.2f} GB/s, "
                    f"{other['median'] / private['median']:.2f}x its own private buffer, and "
                    f"sharedseg at {ours['median'] / other['median']:.2f}x that file: the gap "
                    f"is between shared (shmem) and private (anonymous) 4 KiB pages, which "
                    f"every shared mapping has; on huge pages it is gone.")
    return ""


def gather(rows):
    items, why, ratios = [], [], []
    for ours, theirs in _pairs(rows, "kv_gather"):
        ratio = ours["median"] / theirs["median"]
        ratios.append(ratio)
        if ratio < 0.95:
            items.append(f"{ratio:.2f}x ({ours['role']}, {ours['pages_obtained']}, "
                         f"{size_text(ours['block'])} blocks)")
            why.append(f"{ours['role']}, {ours['pages_obtained']}, {size_text(ours['block'])} "
                       f"blocks: {_overlap(ours, theirs)}{_other_shared(rows, ours)}")
    if ratios:
        items.insert(0, f"{min(ratios):.2f}x-{max(ratios):.2f}x over {len(ratios)} pairs "
                        f"(peer and owner, every block size and page kind)")
    met = None if not ratios else min(ratios) >= 0.95
    return Verdict("KV-block gather >= 0.95x a private buffer of the same page kind",
                   _ratio_line(items), met, why)


# ---- vLLM's offload region ----

VLLM_REGION = "vllm-shared-offload-region"
REGION_READY = {True: 0.5, False: 1.0}  # on huge pages, on anything else


def vllm_pairs(rows, bench):
    """(ours, vLLM's) rows of the vllm section: ours on each page kind, and
    vLLM's of the same size and group size, the two run in turn."""
    for ours in select(rows, section="vllm", bench=bench, mechanism="sharedseg.vllm"):
        theirs = one(rows, section="vllm", bench=bench, mechanism=VLLM_REGION,
                     ranks=ours["ranks"], size=ours["size"])
        if theirs:
            yield ours, theirs


def _region_why(rows, ours, theirs, cores):
    line = (f"{size_text(ours['size'])}, {ours['ranks']} ranks, {ours['pages_obtained']}: "
            f"ours {ours['median'] * 1e3:.0f} ms against vLLM's {theirs['median'] * 1e3:.0f} "
            f"ms on {theirs['pages_obtained']}")
    if ours.get("owner_create_s"):
        line += (f"; our owner's create (allocation and population) took "
                 f"{ours['owner_create_s'] * 1e3:.0f} ms "
                 f"({ours['region_bytes'] / ours['owner_create_s'] / 1e9:.2f} GB/s), the slowest "
                 f"rank's complete {ours['slowest_complete_s'] * 1e3:.0f} ms")
    if ours["pages_obtained"] == "thp" and "smaps_read_ms" in ours:
        line += (f"; on THP every sseg_info reads the rank's /proc/self/smaps to see what was "
                 f"faulted in, one read {ours['smaps_read_ms']:.0f} ms here "
                 f"({ours['vmas']:.0f} mappings in a process that imported vLLM)")
    touch = [one(rows, section="vllm", bench="peer_touch", mechanism=r["mechanism"],
                 ranks=r["ranks"], size=r["size"], pages_requested=r["pages_requested"])
             for r in (ours, theirs)]
    if all(touch):
        line += (f"; a peer's first pass over the region then took "
                 f"{touch[0]['median'] * 1e3:.0f} ms on ours, {touch[1]['median'] * 1e3:.0f} ms "
                 f"on vLLM's, whose ranks all populated it")
    return line + (f"; {ours['ranks']} ranks share {cores} cores" if ours["ranks"] > cores
                   else "")


def vllm_ready(rows, cores, huge):
    limit = REGION_READY[huge]
    items, why, ratios, kinds = [], [], [], set()
    for ours, theirs in vllm_pairs(rows, "ready"):
        if (ours["pages_obtained"] in HUGE) != huge:
            continue
        ratio = ours["median"] / theirs["median"]
        ratios.append(ratio)
        items.append(f"{ratio:.2f}x ({ours['pages_obtained']}, {size_text(ours['size'])}, "
                     f"{ours['ranks']} ranks)")
        if ratio > limit:
            why.append(_region_why(rows, ours, theirs, cores))
            kinds.add(ours["pages_obtained"])
    why += [f"{kind}, this machine: {line}" for kind in sorted(kinds)
            if (line := _host_line(rows, kind))]
    met = None if not ratios else max(ratios) <= limit
    if ratios:
        items.insert(0, f"met in {sum(x <= limit for x in ratios)} of {len(ratios)}")
    kind = "on huge pages (ours)" if huge else "on 4 KiB pages (both)"
    return Verdict(f"vLLM's offload region: ours ready <= {limit:.1f}x vLLM's SharedOffloadRegion "
                   f"{kind}", _ratio_line(items), met, why)


def vllm_memory(rows):
    got = select(rows, section="vllm", bench="memory_factor", mechanism="sharedseg.vllm")
    theirs = select(rows, section="vllm", bench="memory_factor", mechanism=VLLM_REGION)
    items = [f"ours {min(r['median'] for r in got):.3f}-{max(r['median'] for r in got):.3f} "
             f"over {len(got)} cases"] if got else []
    if theirs:
        items.append(f"vLLM's {min(r['median'] for r in theirs):.3f}-"
                     f"{max(r['median'] for r in theirs):.3f}")
    worst = max(got, key=lambda r: r["median"]) if got else None
    met = None if worst is None else worst["median"] <= 1.01
    why = [] if met is not False else [
        f"{size_text(worst['size'])}, {worst['ranks']} ranks, {worst['pages_obtained']}: "
        f"{worst['min']:.3f}-{worst['max']:.3f} over {worst['reps']} repetitions; the count is "
        f"host-wide (Shmem + HugeTLB pages in use), and what other processes allocate "
        f"meanwhile lands in it"]
    return Verdict("vLLM's offload region: memory factor (Shmem + HugeTLB in use over one copy) "
                   "<= 1.01 for ours", _ratio_line(items), met, why)


# ---- populate=background ----

def _bg(rows, bench, **key):
    return select(rows, bench=bench, section="background", **key)


def _bg_cases(rows):
    """(size, ranks, pages requested) of every background case run."""
    return sorted({(r["size"], r["ranks"], r["pages_requested"])
                   for r in _bg(rows, "ready", mechanism="sharedseg", populate="background")})


def _bg_pair(rows, bench, size, ranks, kind):
    key = dict(mechanism="sharedseg", size=size, ranks=ranks, pages_requested=kind)
    return (one(_bg(rows, bench, populate="background", **key), bench=bench),
            one(_bg(rows, bench, populate="owner", **key), bench=bench))


def _case_text(r):
    return f"{r['pages_obtained']}, {size_text(r['size'])}, {r['ranks']} ranks"


def resident_base(rows, cores):
    """4 KiB pages: our time to resident (foreground or background, the
    faster) against the /dev/shm recipe's (its ranks populate their slices)."""
    items, why, ratios = [], [], []
    for size, ranks, kind in _bg_cases(rows):
        if kind != "base":
            continue
        bg, fg = _bg_pair(rows, "resident", size, ranks, kind)
        shm = one(_bg(rows, "resident", mechanism="devshm-file", size=size, ranks=ranks,
                      pages_requested=kind))
        if not (bg and fg and shm):
            continue
        ours = min((bg, fg), key=lambda r: r["median"])
        ratio = ours["median"] / shm["median"]
        ratios.append(ratio)
        items.append(f"{ratio:.2f}x ({_case_text(ours)}, {ours['populate']})")
        if ratio > 0.6:
            why.append(f"{_case_text(ours)}: ours {ours['median'] * 1e3:.0f} ms "
                       f"({size / ours['median'] / 1e9:.2f} GB/s), the recipe "
                       f"{shm['median'] * 1e3:.0f} ms ({size / shm['median'] / 1e9:.2f} GB/s)")
    if why:
        why.append(f"both make every 4 KiB page resident with MADV_POPULATE_WRITE on {cores} "
                   f"cores: the recipe's ranks each take a slice, our owner's threads the "
                   f"whole; the kernel's per-page work (allocation, clearing, page-table "
                   f"entry) bounds both alike. fallocate() allocates the pages without "
                   f"clearing them (shmem clears a page at its first fault), so it moves the "
                   f"clearing to the first touch instead of saving it (see 4 KiB population: "
                   f"the ways tried)")
    met = None if not ratios else max(ratios) <= 0.6
    return Verdict("4 KiB pages: resident <= 0.6x the /dev/shm recipe's time, every rank count",
                   _ratio_line(items), met, why)


def background_usable(rows):
    """Usable: how much later than a lazy group (create, exchange, complete,
    nothing populated) every rank may use the segment; the foreground's
    ready beside."""
    items, why, worst = [], [], None
    for size, ranks, kind in _bg_cases(rows):
        bg, fg = _bg_pair(rows, "ready", size, ranks, kind)
        lazy = one(_bg(rows, "ready", mechanism="sharedseg", populate="lazy", size=size,
                       ranks=ranks, pages_requested=kind))
        if not (bg and lazy):
            continue
        late = bg["median"] - lazy["median"]
        items.append(f"+{late * 1e3:.1f} ms ({_case_text(bg)}: {bg['median'] * 1e3:.1f} ms"
                     + (f", foreground {fg['median'] * 1e3:.0f} ms" if fg else "") + ")")
        if late > 0.010:
            why.append(f"{_case_text(bg)}: ready in {bg['median'] * 1e3:.1f} ms, a lazy group in "
                       f"{lazy['median'] * 1e3:.1f} ms: the owner's threads were populating "
                       f"while the peers completed")
        worst = late if worst is None or late > worst else worst
    met = None if worst is None else worst <= 0.010
    return Verdict("Background: every rank can use the segment <= 10 ms later than with nothing "
                   "populated (populate=lazy), at any size", _ratio_line(items), met, why)


def background_resident(rows, cores):
    items, why, ratios = [], [], []
    for size, ranks, kind in _bg_cases(rows):
        bg, fg = _bg_pair(rows, "resident", size, ranks, kind)
        if not (bg and fg):
            continue
        ratio = bg["median"] / fg["median"]
        ratios.append(ratio)
        items.append(f"{ratio:.2f}x ({_case_text(bg)})")
        if ratio > 1.1:
            reader = ", with the first peer reading the segment meanwhile" if ranks > 1 else ""
            why.append(f"{_case_text(bg)}: background {bg['median'] * 1e3:.0f} ms, foreground "
                       f"(2 threads) {fg['median'] * 1e3:.0f} ms{reader}")
    if why:
        why.append(f"with a reader, the owner's {min(cores, 4)} workers and the reader share "
                   f"this machine's {cores} cores, and the reader faults in the pages the "
                   f"workers have not reached yet, at the speed of population; alone (1 rank) "
                   f"the work runs as fast as the foreground's")
    met = None if not ratios else max(ratios) <= 1.1
    return Verdict("Background: resident within 1.1x the foreground time (owner, 2 threads)",
                   _ratio_line(items), met, why)


def background_reads(rows):
    items, why, ratios = [], [], []
    for size, ranks, kind in _bg_cases(rows):
        bg, fg = _bg_pair(rows, "resident", size, ranks, kind)
        if not (bg and fg and bg.get("during_read_gbps") and fg.get("during_read_gbps")):
            continue
        ratio = bg["during_read_gbps"] / fg["during_read_gbps"]
        ratios.append(ratio)
        items.append(f"{ratio:.2f}x ({_case_text(bg)})")
        if ratio < 0.8:
            why.append(f"{_case_text(bg)}: the first peer's first read ran at "
                       f"{bg['during_read_gbps']:.2f} GB/s during the work and "
                       f"{fg['during_read_gbps']:.2f} GB/s on a populated segment: a page "
                       f"the work has not reached yet is allocated and cleared by the read "
                       f"itself, so the read runs at population speed there")
    met = None if not ratios else min(ratios) >= 0.8
    return Verdict("Background: a rank's reads during the population >= 0.8x their speed on "
                   "a populated segment (the first peer's first read)",
                   _ratio_line(items), met, why)


def evaluate(rows, cores):
    limits = {r["pages_obtained"]: r["median"] for r in select(rows, bench="memset_limit")}
    return [memory_factor(rows), page_tables(rows), create(rows, limits), spread(rows, cores),
            first_read(rows), steady_read(rows), gather(rows), peer_complete(rows),
            vllm_ready(rows, cores, huge=True), vllm_ready(rows, cores, huge=False),
            vllm_memory(rows), resident_base(rows, cores), background_usable(rows),
            background_resident(rows, cores), background_reads(rows)]
