# SPDX-License-Identifier: Apache-2.0
"""The report's plots (PNG, matplotlib's Agg backend): one function a plot,
each returning (file name, caption) or None when its rows are missing."""
import os

from rows import KINDS_ORDER, select, size_text

MECH_STYLE = {
    "sharedseg": ("tab:blue", "o"),
    "private-malloc": ("tab:red", "s"),
    "devshm-file": ("tab:green", "^"),
    "memfd-procfd": ("tab:purple", "v"),
    "sharedseg-py": ("tab:cyan", "o"),
    "private-torch": ("tab:orange", "s"),
    "torch-share-memory": ("tab:olive", "^"),
    "mp-shared-memory": ("tab:brown", "v"),
}


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _kinds(rows):
    got = {r["pages_requested"] for r in rows}
    return [k for k in KINDS_ORDER if k in got]


def _label(rows, mech):
    """mech, with the page kind it got where that is not the kind asked"""
    got = {r["pages_obtained"] for r in rows if r["pages_obtained"] != r["pages_requested"]}
    return f"{mech} (got {', '.join(sorted(got))})" if got else mech


def _by_ranks(ax, rows, mech, value):
    mine = select(rows, mechanism=mech)
    pts = sorted((r["ranks"], value(r)) for r in mine)
    if pts:
        color, marker = MECH_STYLE.get(mech, ("black", "x"))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color,
                label=_label(mine, mech))


def _panels(plt, kinds, title):
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.2 * len(kinds), 3.6), squeeze=False)
    fig.suptitle(title, fontsize=10)
    return fig, axes[0]


def _ranks_axis(ax, kind, ylabel):
    ax.set(title=f"pages asked: {kind}", xlabel="ranks", ylabel=ylabel, xscale="log")
    ax.minorticks_off()
    ax.set_xticks([1, 2, 4, 8], ["1", "2", "4", "8"])
    ax.legend(fontsize=7)


def _save(plt, fig, docs, name):
    fig.tight_layout()
    fig.savefig(os.path.join(docs, name), dpi=90)
    plt.close(fig)
    return name


def _ranks_sweep_size(rows):
    """The size with the most group sizes measured (the ranks sweep)."""
    counts = {}
    for r in select(rows, bench="memory_factor", section="scaling"):
        counts.setdefault(r["size"], set()).add(r["ranks"])
    return max(counts, key=lambda s: (len(counts[s]), -s)) if counts else None


def _ranks_plot(rows, docs, plt, what):
    """One panel a page kind asked, a line a mechanism, group size across:
    what = (bench, value of a row, y label, title, file name, caption)."""
    bench, value, ylabel, title, name, caption = what
    size = _ranks_sweep_size(rows)
    if size is None:
        return None
    got = select(rows, bench=bench, section="scaling", size=size)
    kinds = _kinds(got)
    fig, axes = _panels(plt, kinds, title.format(size=size_text(size)))
    for ax, kind in zip(axes, kinds):
        for mech in MECH_STYLE:
            _by_ranks(ax, select(got, pages_requested=kind), mech, value)
        if bench == "page_tables":
            ax.axhline(0.1, color="grey", linestyle=":", linewidth=1)
        _ranks_axis(ax, kind, ylabel)
    return _save(plt, fig, docs, name), caption.format(size=size_text(size))


def memory_factor(rows, docs, plt):
    return _ranks_plot(rows, docs, plt, (
        "memory_factor", lambda r: r["median"], "memory factor",
        "Host memory over the segment size, {size} segment (private buffers: one a rank)",
        "bench_memory_factor.png", "Memory factor against group size, {size}, by page kind "
        "asked"))


def page_tables(rows, docs, plt):
    return _ranks_plot(rows, docs, plt, (
        "page_tables", lambda r: 100 * max(r["median"], 0) / r["size"], "% of the segment",
        "The group's page tables (sum of the ranks' VmPTE rise), {size} segment",
        "bench_page_tables.png", "Page tables against group size, {size}; the dotted line "
        "is 0.1%"))


def ready(rows, docs, plt):
    return _ranks_plot(rows, docs, plt, (
        "ready", lambda r: r["median"] * 1e3, "ms",
        "Time until every rank can use the segment, {size} (2 cores: 8 ranks share them)",
        "bench_ready.png", "Time until every rank can use the segment against group size, "
        "{size}"))


def ready_by_size(rows, docs, plt):
    got = select(rows, bench="ready", section="scaling", ranks=8)
    kinds = _kinds(got)
    if not kinds:
        return None
    fig, axes = _panels(plt, kinds, "Time until all 8 ranks can use the segment, by size")
    for ax, kind in zip(axes, kinds):
        for mech in MECH_STYLE:
            mine = select(got, pages_requested=kind, mechanism=mech)
            pts = sorted((r["size"] / 2**30, r["median"]) for r in mine)
            if pts:
                color, marker = MECH_STYLE[mech]
                ax.plot(*zip(*pts), marker=marker, color=color, label=_label(mine, mech))
        sizes = sorted({r["size"] / 2**30 for r in select(got, pages_requested=kind)})
        ax.set(title=f"pages asked: {kind}", xlabel="GiB", ylabel="s", xscale="log",
               yscale="log")
        ax.minorticks_off()
        ax.set_xticks(sizes, [f"{x:g}" for x in sizes])
        ax.legend(fontsize=7)
    return _save(plt, fig, docs, "bench_ready_size.png"), \
        "Time until all 8 ranks can use the segment against its size (log-log)"


def populate(rows, docs, plt):
    got = select(rows, bench="ready", section="populate")
    if not got:
        return None
    groups = sorted({(r["size"], r["ranks"]) for r in got})
    kinds = _kinds(got)
    modes = sorted({(r["populate"], r["threads"]) for r in got})
    fig, axes = _panels(plt, kinds, "sharedseg's populate modes: time until every rank can "
                                    "use the segment")
    for ax, kind in zip(axes, kinds):
        width = 0.8 / len(modes)
        for i, (mode, threads) in enumerate(modes):
            ys = []
            for size, ranks in groups:
                r = select(got, size=size, ranks=ranks, pages_requested=kind, populate=mode,
                           threads=threads)
                ys.append(r[0]["median"] * 1e3 if r else 0)
            label = mode + (f" ({threads:g} thread{'s' if threads > 1 else ''})"
                            if threads else "")
            ax.bar([g + i * width for g in range(len(groups))], ys, width, label=label)
        ax.set(title=f"pages asked: {kind}", ylabel="ms",
               xticks=[g + 0.4 - width / 2 for g in range(len(groups))],
               xticklabels=[f"{size_text(s)}\n{n} ranks" for s, n in groups])
        ax.legend(fontsize=7)
    return _save(plt, fig, docs, "bench_populate.png"), \
        "Populate modes (lazy leaves the pages to first touch: its time is not population)"


def bandwidth(rows, docs, plt):
    got = select(rows, section="bandwidth", paired_with="sharedseg")
    kinds = _kinds(got)
    if not kinds:
        return None
    fig, axes = _panels(plt, kinds, "Copy bandwidth: the segment (peer, owner) against a "
                                    "private buffer of the same page kind")
    for ax, kind in zip(axes, kinds):
        _bandwidth_panel(ax, select(got, pages_requested=kind),
                         select(rows, section="limits", pages_requested=kind))
        ax.set_title(f"pages asked: {kind}")
    return _save(plt, fig, docs, "bench_bandwidth.png"), \
        "Sequential read and copy, and the KV-block gather, GB/s; the dotted lines are the " \
        "machine's read and memcpy rates on populated private memory of that kind"


def _bandwidth_panel(ax, rows, limits):
    tests = [("seq_read", None), ("seq_copy", None)] + \
        [("kv_gather", b) for b in sorted({r["block"] for r in rows if "block" in r})]
    roles = [("peer", "peer", "tab:blue"), ("owner", "owner", "tab:cyan"),
             ("private", "peer", "tab:red")]
    for i, (role, pair, color) in enumerate(roles):
        ys = []
        for bench, block in tests:
            r = select(rows, bench=bench, role=role, pair=pair)
            r = [x for x in r if x.get("block") == block]
            ys.append(r[0]["median"] if r else 0)
        ax.bar([t + i * 0.27 for t in range(len(tests))], ys, 0.27, color=color,
               label="private" if role == "private" else f"segment, {role}")
    for bench, lo, hi in (("read_limit", -0.2, 0.8), ("memcpy_limit", 0.8, len(tests) - 0.2)):
        got = select(limits, bench=bench)
        if got:
            ax.hlines(got[0]["median"], lo, hi, color="grey", linestyle=":", linewidth=1)
    ax.set(ylabel="GB/s", xticks=[t + 0.27 for t in range(len(tests))],
           xticklabels=["read", "copy"] + [f"gather\n{size_text(b)}" for _, b in tests[2:]])
    ax.legend(fontsize=7)


def python(rows, docs, plt):
    got = select(rows, section="python")
    if not got:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    fig.suptitle("The Python mechanisms: one bar a mechanism and page kind obtained",
                 fontsize=10)
    largest = max(r["ranks"] for r in got)
    for ax, bench, unit, scale in ((axes[0], "memory_factor", "memory factor", 1),
                                   (axes[1], "ready", "ms until every rank can use it", 1e3)):
        pts = select(got, bench=bench, ranks=largest)
        labels = [f"{r['mechanism']}\n{r['pages_obtained']}" for r in pts]
        ax.bar(range(len(pts)), [r["median"] * scale for r in pts],
               color=[MECH_STYLE.get(r["mechanism"], ("grey",))[0] for r in pts])
        ax.set(ylabel=unit, title=f"{largest} ranks, {size_text(pts[0]['size'])}"
               if pts else "", xticks=range(len(pts)))
        ax.set_xticklabels(labels, fontsize=6, rotation=45, ha="right")
    return _save(plt, fig, docs, "bench_python.png"), \
        "Python: host memory and time until every rank can use the buffer"


ALL = [memory_factor, page_tables, ready, ready_by_size, populate, bandwidth, python]


def make_all(rows, docs):
    """[(file name, caption)] of the plots whose rows exist."""
    plt = _pyplot()
    out = []
    for plot in ALL:
        made = plot(rows, docs, plt)
        if made:
            out.append(made)
    return out
