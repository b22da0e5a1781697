#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""SGLang's Mooncake tier, one fetch per host: a prefix prefetched by an
attention-TP group of TP ranks on host B from a Mooncake master and a
writer on host A (two network namespaces joined by a veth pair), with
SHAREDSEG_SGLANG (the ranks split the pages into the one copy) and without
(SGLang alone: every rank fetches every page into its own pool). Each group
is SGLang's own HiCacheController over its MLA host pool on CPU
(python/tests/helpers/sglang_mooncake_group.py). Measured per prefetch:
the time from SGLang's prefetch call until every rank has the rank-agreed
completion (the slowest rank's), and the bytes host B received
(/proc/net/dev of its end of the link). Prints one JSON row per
(prefix, TP, mechanism); bench/run.py collects them.

    sglang_mooncake.py [--ranks 2,4] [--pages 64,512] [--reps 3]

Needs root (network namespaces; else exits 2, skipped) and the engines' environment (SGLang,
Mooncake: make deps)."""
import argparse
import json
import os
import statistics
import sys
import tempfile
import pathlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTS = os.path.join(ROOT, "python", "tests")
sys.path[:0] = [os.path.join(TESTS, "helpers"), TESTS, os.path.join(ROOT, "tests", "netns")]

PAGE_BYTES = 16 * 2 * 576 * 2  # the helper's pool: 16 tokens, 2 layers, 576 bf16 a token
# name: (the rows' mechanism, SHAREDSEG_SGLANG): ours on its default pages
# and on base pages (the kind SGLang's pool, from Mooncake's allocator, gets
# here), and SGLang alone
MECHANISMS = {"sharedseg": ("sharedseg", "1"),
              "sharedseg-base": ("sharedseg", '{"pages": "base"}'),
              "sglang": ("sglang", "0")}


def environment(site, switch, host):
    from conftest import env_with_package
    env = env_with_package(SHAREDSEG_SGLANG=switch, MC_TCP_BIND_ADDRESS=host,
                           GLOO_SOCKET_IFNAME="lo")
    env["PYTHONPATH"] = os.pathsep.join((site, env["PYTHONPATH"]))
    return env


def measure(args):
    from conftest import plugin_site
    from mooncake_master import MooncakeMaster
    from sglang_mooncake_group import Group, mooncake_config, rx_bytes
    from twohosts import Hosts
    site = plugin_site(pathlib.Path(tempfile.mkdtemp(prefix="sseg-bench-sgl-")))
    pages = [int(p) for p in args.pages.split(",")]
    ratio = 2 * max(pages) / 16  # the pool holds the largest prefix twice over
    rows = []
    with Hosts() as hosts:
        within = [["ip", "netns", "exec", ns] for ns in hosts.ns]
        with MooncakeMaster(hosts.addr[0], within[0]) as master:
            # the writer's share of the store: every prefix, in whole 64 MiB
            need = 2 * sum(pages) * PAGE_BYTES
            config = dict(mooncake_config(master, hosts.addr[0]),
                          global_segment_size=-(-need // (64 << 20)) * (64 << 20))
            a = Group(1, config, environment(site, "1", hosts.addr[0]), within[0], ratio)
            try:
                assert "crash" not in a.ready[0], a.ready
                for n in pages:
                    assert a.ask(f"store {n} {n}")[0]["stored"] == n * 16
                for ranks in (int(r) for r in args.ranks.split(",")):
                    for name in args.mechanisms.split(","):
                        mechanism, switch = MECHANISMS[name]
                        b = Group(ranks, mooncake_config(master, hosts.addr[1]),
                                  environment(site, switch, hosts.addr[1]), within[1], ratio)
                        try:
                            for n in pages:
                                rows.append(_row(b, hosts, rx_bytes, n, ranks, mechanism,
                                                 args.reps))
                                print(json.dumps(rows[-1]), flush=True)
                        finally:
                            b.close()
            finally:
                a.close()
    return rows


def _row(b, hosts, rx_bytes, pages, ranks, mechanism, reps):
    times, moved = [], []
    b.ask(f"prefetch {pages} {pages}")  # warm-up: connections, first touch of the pool
    for _ in range(reps):
        before = rx_bytes(hosts, 1)
        got = b.ask(f"prefetch {pages} {pages}")
        moved.append(rx_bytes(hosts, 1) - before)
        for r in got:
            assert r["completed"] == pages * 16 and all(r["same"]), r
        times.append(max(r["seconds"] for r in got))
    return dict(bench="sglang_mooncake", mechanism=mechanism, ranks=ranks,
                size=pages * PAGE_BYTES, pages_fetched=[r["fetched"] for r in got],
                pages="/".join(sorted({r["pages"] for r in got})),
                median=statistics.median(times), min=min(times), max=max(times), unit="s",
                rx_bytes=statistics.median(moved), reps=reps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4", help="TP sizes of the prefetching group")
    ap.add_argument("--pages", default="64,512", help="prefix sizes, in pages of 36 KiB")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--mechanisms", default=",".join(MECHANISMS),
                    help=f"of {', '.join(MECHANISMS)}")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("sglang_mooncake: network namespaces need root", file=sys.stderr)
        return 2  # bench/run.py: skipped
    measure(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
