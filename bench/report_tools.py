# SPDX-License-Identifier: Apache-2.0
"""The report's sections that set other tools beside ours (bench/report.py
renders them in its order): Mooncake's own shared segment, the host pool
beside a server's round trip and memcpy, vLLM's offload region and its
recipes, and SGLang's Mooncake tier with and without the one copy."""
import targets
from rows import (GIB, kind_key, kind_text, mechanism_lines, one, select, size_text, spread_text,
                  table, value_text)


def mooncake_section(rows):
    got = select(rows, section="mooncake")
    if not got:
        return ""
    lines = mechanism_lines(got, "mooncake",
                             ("ready", "first_read", "memory_factor", "page_tables"))
    return ("## Mooncake's own shared segment\n\n"
            "`mooncake.shared_segment.create_shared_segment` (PyPI's "
            "`mooncake-transfer-engine-non-cuda`, in the engines' environment) and ours, the "
            "same call over the same gloo group on the same interpreter: one block of the "
            "size, written once by the owner (ours populates it, Mooncake's owner writes a "
            "byte a page), then read once whole by the first peer. Ours on every page kind; "
            "Mooncake's takes none (POSIX shared memory in /dev/shm, whose huge pages the "
            "tmpfs mount decides): the kind each obtained is shown. *Ready*: from the first "
            "rank's call until the last rank has its buffer, the owner's first touch "
            "counted. *Memory*: host memory used over the segment's size. *Page tables*: "
            "every rank's, with the peer's read done.\n\n"
            + table(["size", "ranks", "mechanism", "pages", "ready", "peer first read",
                     "memory factor", "page tables"], lines))


def _pool_lookups(rows):
    lines = []
    ours = sorted(select(rows, section="pool", bench="pool_lookup", mechanism="sharedseg-pool"),
                  key=lambda r: (kind_key(r), r["ranks"]))
    for r in ours:
        floor = one(rows, section="pool", bench="pool_lookup", mechanism="unix-socket-server",
                    ranks=r["ranks"], pages_requested=r["pages_requested"])
        if floor:
            lines.append((r["pages_requested"], r["ranks"], f"{r['median']:.0f} ns",
                          f"{floor['median']:.0f} ns", f"{floor['median'] / r['median']:.1f}x"))
    return table(["pool on", "processes at once", "pool: a key (lookup + pin + unpin)",
                  "server floor: a key (64 a round trip)", "floor / pool"], lines)


def _pool_copies(rows):
    lines = []
    for plain in sorted(select(rows, section="pool", bench="pool_copy", role="memcpy"),
                        key=kind_key):
        key = dict(section="pool", bench="pool_copy", size=plain["size"],
                   pages_requested=plain["pages_requested"])
        store, load = one(rows, role="store", **key), one(rows, role="load", **key)
        if store and load:
            lines.append((kind_text(store), size_text(plain["size"]), value_text(store),
                          value_text(load), value_text(plain),
                          f"{store['median'] / plain['median']:.2f}",
                          f"{load['median'] / plain['median']:.2f}"))
    return table(["pages (pool)", "chunk", "store", "load", "memcpy, same kind",
                  "store / memcpy", "load / memcpy"], lines)


def pool_section(rows):
    got = select(rows, section="pool")
    if not got:
        return ""
    out = ("## The host pool\n\n"
           "`sharedseg bench pool`: one pool (`sseg_pool_*`), opened by every process by name. "
           "*Lookups*: a 64-key prefix looked up and pinned, then let go, 2,000 times per "
           "process, by 1 to 8 processes at once (this machine has "
           "2 cores: past 2, processes take turns), per key; beside the floor of any design "
           "with a server in the data path: the same 64 keys sent over a Unix socket to a "
           "process that answers from a hash table (a thread a client) and the answer read "
           "back, per key. No server design can do better than its round trip. "
           "*Copies*: 64 chunks stored (reserve, memcpy in, publish) and loaded (get, memcpy "
           "out, unpin), against memcpy of the same bytes between private buffers of the "
           "same page kind. LMCache's own multi-process server (0.5.6, `python -m "
           "lmcache.v1.multiprocess.server --l1-size-gb 1 --eviction-policy LRU` in the "
           "engines' environment) does not start on this machine: it imports "
           "`opentelemetry.exporter.prometheus`, which its wheel does not install; it is not "
           "measured here.\n\n" + _pool_lookups(rows) + "\n" + _pool_copies(rows))
    kill = one(got, bench="pool_reclaim", role="open after a kill")
    clean = one(got, bench="pool_reclaim", role="open")
    if kill and clean:
        out += (f"\n*Reclaim*: a process pins {kill['pinned']:,} of {kill['size']:,} chunks "
                f"and half-stores one, and is SIGKILLed; the next open takes its slot and "
                f"gives back what it held: {value_text(kill)} "
                f"({value_text(kill, 'min')}-{value_text(kill, 'max')}), against "
                f"{value_text(clean)} for an open with nothing to give back.\n")
    kills = one(got, bench="pool_kills")
    if kills:
        out += (f"\n*Under attack* (`tests/test_pool_attack`, its rounds raised): 4 processes "
                f"look up, store, drop and evict at random on a pool of 24 chunks and 80 keys, "
                f"each checking every hit's bytes against its key; one is SIGKILLed at a "
                f"random point each round, {kills['kills']:,} rounds: "
                f"**{kills['median']:.0f} hits with wrong bytes** in {kills['hits']:,} hits, "
                f"{kills['stores']:,} stores, {kills['evictions']:,} evictions, "
                f"{kills['reclaims']:,} slots of killed processes reclaimed.\n")
    return out


def sglang_mooncake_section(rows):
    got = select(rows, section="sglang_mooncake")
    if not got:
        return ""
    lines = []
    for theirs in sorted(select(got, mechanism="sglang"), key=lambda r: (r["ranks"], r["size"])):
        ours = select(got, mechanism="sharedseg", ranks=theirs["ranks"], size=theirs["size"])
        for r in ours + [theirs]:
            lines.append((size_text(r["size"]), r["ranks"], r["mechanism"], r["pages"],
                          spread_text(r), size_text(int(r["rx_bytes"])),
                          f"{r['rx_bytes'] / r['size']:.2f}",
                          "/".join(map(str, r["pages_fetched"]))))
        same = one(ours, pages=theirs["pages"])  # time: on the same page kind
        if same is not None:
            lines.append(("", "", "**sharedseg / SGLang**", f"**{same['pages']}**",
                          f"**{same['median'] / theirs['median']:.2f}**", "",
                          f"**{same['rx_bytes'] / theirs['rx_bytes']:.2f}**", ""))
    return ("## SGLang's Mooncake tier: one fetch per host\n\n"
            "`bench/sglang_mooncake.py`: two hosts, network namespaces joined by a veth pair; "
            "on host A a `mooncake_master` (PyPI's `mooncake-transfer-engine-non-cuda`, TCP) "
            "and a writer that backs the prefix up; on host B an attention-TP group of TP "
            "ranks prefetches it, each rank SGLang 0.5.23's own `HiCacheController` over its "
            "MLA host pool on CPU (pages of 36 KiB), with `SHAREDSEG_SGLANG=1` (sharedseg: "
            "the ranks split the pages into the one copy) and without (SGLang: each rank "
            "fetches every page into its own pool). *Prefetch*: from SGLang's prefetch call "
            "until the slowest rank has the rank-agreed completion (the hit query, the "
            "transfer, the acks' all-reduces), after one warm-up. *Into host B*: the bytes its "
            "end of the link received per prefetch (`/proc/net/dev`), over the prefix's. "
            "*Pool pages*: what each pool obtained (`/proc/self/smaps`); SGLang's pool "
            "comes from Mooncake's allocator, ours from sharedseg on its default pages and "
            "on base pages, and the ratios set ours beside SGLang's on the same kind. "
            "*Pages asked*: by each rank. On one machine the two hosts share its cores and "
            "memory bandwidth, so the time says little of a real network; the bytes are what "
            "a real one would carry.\n\n"
            + table(["prefix", "TP", "mechanism", "pool pages", "prefetch",
                     "into host B", "/ prefix", "pages asked"], lines))


def _region_cells(rows, ours, theirs, bench, text):
    key = dict(section="vllm", bench=bench, ranks=ours["ranks"], size=ours["size"])
    a = one(rows, mechanism=ours["mechanism"], pages_requested=ours["pages_requested"], **key)
    b = one(rows, mechanism=theirs["mechanism"], **key)
    return f"{text(a)} / {text(b)}" if a and b else ""


# vLLM's recipes for its region (bench/vllmbench.py's VLLM_RECIPES), as the
# report names them.
RECIPES = (
    ("vllm-shared-offload-region", "0.32 default (every rank populates)"),
    ("vllm-shared-offload-region-populate-only-on-creator", "0.32 populate_only_on_creator"),
    ("vllm-0.33-region-32-files-populate-shard", "0.33 (32 files, each rank its shard)"),
)


def recipes_table(rows):
    """Ours' ready against every recipe measured beside it: "theirs (ours /
    theirs)" a cell; "" where that recipe did not run."""
    present = [(m, title) for m, title in RECIPES if select(rows, section="vllm", mechanism=m)]
    lines = []
    ours_rows = sorted(select(rows, section="vllm", bench="ready", mechanism="sharedseg.vllm"),
                       key=lambda r: (kind_key(r), r["size"], r["ranks"]))
    for ours in ours_rows:
        cells = []
        for mech, _ in present:
            theirs = one(rows, section="vllm", bench="ready", mechanism=mech,
                         ranks=ours["ranks"], size=ours["size"])
            cells.append(f"{theirs['median'] * 1e3:.1f} ms on {theirs['pages_obtained']} "
                         f"({ours['median'] / theirs['median']:.2f}x)" if theirs else "")
        lines.append((ours["ranks"], size_text(ours["size"]), ours["pages_obtained"],
                      f"{ours['median'] * 1e3:.1f} ms", *cells))
    if not lines or not present:
        return ""
    return ("\nOurs against each recipe of vLLM's region measured beside it (ready, median; "
            "in brackets ours as a multiple of theirs; each with the page kind it was "
            "measured on):\n\n"
            + table(["ranks", "size", "ours: pages", "ours: ready"] + [t for _, t in present],
                    lines))


def vllm_section(result):
    rows = select(result["rows"], section="vllm")
    why = [s["reason"] for s in result.get("skipped", []) if s["case"].startswith("vllm:")]
    why += ["FAILED: " + f["error"] for f in result.get("failures", [])
            if f["case"].startswith("vllm:")]
    why = list(dict.fromkeys(why))
    out = ("## vLLM's offload region\n\n"
           "vLLM 0.32's own host KV region, `SharedOffloadRegion`, built as its "
           "CPUOffloadingSpec builds it for an MLA model at TP > 1 (the replicated layout: every "
           "rank passes rank=0, one copy; its barrier a gloo barrier of all ranks): a file in "
           "/dev/shm that every rank maps and populates with MADV_POPULATE_WRITE, so on 4 KiB "
           "pages whatever the knobs. Against it `sharedseg.vllm.SharedSegRegion` over the same "
           "ranks' gloo group (populate owner, no pinning) on each page kind, all in turn in one "
           "process group, the order rotating every repetition. A chunk is an MLA "
           "model's: DeepSeek-V3's 61 layers x 576 bf16 latent values x 64 tokens (4.29 MiB); "
           "the region is as many chunks as the size holds. *Ready*: from a common start after "
           "a barrier to the last rank's return. *Memory factor*: the rise of Shmem + HugeTLB "
           "pages in use (/proc/meminfo, the pools; never RSS, which leaves HugeTLB out) "
           "while every rank holds the region, over the region's bytes. *Page tables* are the "
           "ranks' own (VmPTE) at ready; *a peer's first pass* reads a byte of every 4 KiB of "
           "the region in rank 1 after ready: where ours' peers make their page tables, which "
           "vLLM's ranks made while populating. vLLM's other recipes, where the run had "
           "them: 0.32's populate_only_on_creator (the creator alone populates), and 0.33's "
           "region from 0.33's own file (`make vllm033-region`), split into 32 shm files "
           "under one mapping (one per GiB below 32 GiB) with each rank pre-faulting its "
           "shard.\n\n")
    pairs = sorted(targets.vllm_pairs(rows, "ready"),
                   key=lambda p: (kind_key(p[0]), p[0]["size"], p[0]["ranks"]))
    lines = []
    for ours, theirs in pairs:
        limit = targets.REGION_READY[ours["pages_obtained"] in targets.HUGE]
        ratio = ours["median"] / theirs["median"]
        reported = ours.get("pages_reported", ours["pages_obtained"])
        pages = ours["pages_obtained"] + (f" (sharedseg: {reported})"
                                          if reported != ours["pages_obtained"] else "")
        lines.append((ours["ranks"], f"{size_text(ours['size'])} "
                      f"({ours['region_bytes'] / GIB:.3f} GiB)", pages, spread_text(ours),
                      f"{spread_text(theirs)}, {theirs['pages_obtained']}", f"{ratio:.2f}x",
                      f"{'met' if ratio <= limit else '**missed**'} (<= {limit:.1f}x)",
                      _region_cells(rows, ours, theirs, "memory_factor", value_text),
                      _region_cells(rows, ours, theirs, "page_tables", value_text),
                      _region_cells(rows, ours, theirs, "peer_touch", value_text)))
    if lines:
        out += table(["ranks", "size (region)", "ours: pages", "ours: ready (min-max)",
                      "vLLM's: ready (min-max), pages", "ours / vLLM's", "target",
                      "memory factor ours / vLLM's", "page tables ours / vLLM's",
                      "a peer's first pass ours / vLLM's"], lines)
    out += recipes_table(rows)
    small = select(rows, bench="small_devshm")
    if small:
        out += (f"\nIn a container-sized /dev/shm ({size_text(small[0]['devshm_bytes'])} tmpfs, "
                f"a private mount namespace), a {size_text(small[0]['size'])} region, "
                f"{small[0]['ranks']} ranks:\n\n")
        for r in sorted(small, key=lambda r: r["mechanism"]):
            who = "ours" if r["mechanism"] == "sharedseg.vllm" else "vLLM's"
            if r["outcome"] == "ready":
                out += (f"- {who}: ready in {value_text(r)} on {r['pages_obtained']} pages "
                        f"(it names no file: /dev/shm's size does not bound it)\n")
            else:
                out += f"- {who}: failed after {value_text(r)}: " + "; ".join(
                    f"`{e}`" for e in r["errors"]) + "\n"
    if not rows:
        out += "Not measured in this run" + (": " + "; ".join(why) if why else "") + ".\n"
    elif why:
        out += "\nNot measured: " + "; ".join(why) + "\n"
    return out
