# SPDX-License-Identifier: Apache-2.0
"""SGLang's Mooncake tier over the group's one copy (sharedseg.sglang's
SharedMooncakeStore), against the real SGLang (0.5.23) and a real Mooncake
master (PyPI's mooncake-transfer-engine-non-cuda, over TCP): each group is
SGLang's own HiCacheController over SGLang's own MLA host pool, in ranks
spawned as SGLang spawns its schedulers, switched by SHAREDSEG_SGLANG alone
(helpers/sglang_mooncake_group.py). A prefix that rank 0 of one group
backed up is prefetched by another group of two ranks: with the switch the
two ranks split the pages (each asks Mooncake for half) and both read every
page right from the one copy; without it each asks for every page. A slow
fetcher, and a fetcher that fails, are covered by SGLang's own
MIN-all-reduced acks. As two hosts (network namespaces), the bytes that
reach the prefetching host are one copy of the prefix with the switch, two
without (/proc/net/dev)."""
import json
import os
import random
import subprocess
import sys

import pytest

from conftest import HELPERS, ROOT, switched_on

pytestmark = pytest.mark.engine

PAGES = 16
PAGE_BYTES = 16 * 2 * 576 * 2  # sglang_ranks: 16 tokens, 2 layers, 576 bf16 a token


class Group:
    """helpers/sglang_mooncake_group.py: WORLD ranks with HiCache's Mooncake
    tier, driven by lines on stdin."""

    def __init__(self, world, mooncake, env, within=(), ratio=2.0):
        self.p = subprocess.Popen(
            list(within) + [sys.executable, os.path.join(HELPERS, "sglang_mooncake_group.py"),
                            str(world), str(random.randint(20000, 60000)),
                            json.dumps(dict(mooncake=mooncake, ratio=ratio))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.ready = self.read()

    def read(self):
        line = self.p.stdout.readline()
        assert line, f"the group ended: {self.p.wait(timeout=120)}"
        ranks = json.loads(line)["ranks"]
        return ranks

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        ranks = self.read()
        for r in ranks:
            assert r is not None and "crash" not in r, r
        return ranks

    def close(self):
        if self.p.poll() is None:
            self.ask("quit")
            self.p.stdin.close()
        assert self.p.wait(timeout=120) == 0
        self.p.stdout.close()


def mooncake_config(master, host="127.0.0.1", **more):
    return dict(master_server_address=master.rpc, metadata_server=master.metadata,
                protocol="tcp", global_segment_size=64 << 20, local_hostname=host, **more)


def env_of(tmp_path, switch, host="127.0.0.1"):
    env = switched_on(tmp_path, switch) if switch else switched_on(tmp_path, "0")
    env["MC_TCP_BIND_ADDRESS"] = host
    if host != "127.0.0.1":  # a namespace's: gloo between its ranks on its loopback
        env["GLOO_SOCKET_IFNAME"] = "lo"
    return env


@pytest.fixture(scope="module")
def master():
    sys.path.insert(0, HELPERS)
    from mooncake_master import MooncakeMaster
    with MooncakeMaster() as m:
        yield m


@pytest.fixture(scope="module")
def writer(master, tmp_path_factory):
    """Group A, two ranks on one copy: rank 0 backs the prefixes up."""
    a = Group(2, mooncake_config(master), env_of(tmp_path_factory.mktemp("a"), "1"))
    try:
        assert [r["ready"] for r in a.ready] == ["SharedMooncakeStore"] * 2, a.ready
        for seed in (1, 2, 3):
            got = a.ask(f"store {seed} {PAGES}")
            assert [r["stored"] for r in got] == [PAGES * 16, 0]  # rank 0 alone writes MLA
        yield a
    finally:
        a.close()


def all_right(ranks, pages=PAGES):
    for r in ranks:
        assert r["completed"] == pages * 16, r
        assert r["same"] == [True] * pages, r


def test_one_fetch_per_host(master, writer, tmp_path):
    b = Group(2, mooncake_config(master), env_of(tmp_path, "1"))
    try:
        assert [(r["ready"], r["allocator"]) for r in b.ready] == \
            [("SharedMooncakeStore", "SharedSegHostTensorAllocator")] * 2
        got = b.ask(f"prefetch 1 {PAGES}")
        all_right(got)
        # the ranks split the pages: each asked Mooncake for its half, and
        # read the other half, which the other rank fetched, from the copy
        assert [(r["fetched"], r["left"]) for r in got] == [(PAGES // 2, PAGES // 2)] * 2

        # a slow fetcher: rank 0's gets wait 1.5 s; rank 1, done with its
        # own half at once, reads rank 0's pages only once SGLang's
        # MIN-reduced ack says they are complete
        assert [r["fault"] for r in b.ask("fault 0 1500 -1")] == [True, False]
        got = b.ask(f"prefetch 2 {PAGES}")
        all_right(got)
        assert got[1]["seconds"] >= 1.5, got  # rank 1 waited for rank 0's half

        # a fetcher that fails from its third page (page 5 of the prefix,
        # rank 1 fetching pages 1, 3, 5, ...): both ranks agree on the
        # pages before it, whoever fetched them
        b.ask("fault 0 0 -1")
        assert [r["fault"] for r in b.ask("fault 1 0 2")] == [False, True]
        got = b.ask(f"prefetch 3 {PAGES}")
        for r in got:
            assert r["completed"] == 5 * 16, r
            assert r["same"] == [True] * 5, r
    finally:
        b.close()

    own = Group(2, mooncake_config(master), env_of(tmp_path, None))
    try:
        assert [(r["ready"], r["allocator"]) for r in own.ready] == \
            [("MooncakeStore", "MooncakeHostTensorAllocator")] * 2
        got = own.ask(f"prefetch 1 {PAGES}")
        all_right(got)
        assert [r["fetched"] for r in got] == [PAGES, PAGES]  # SGLang alone: every rank all
    finally:
        own.close()


def test_standalone_storage_is_refused_with_a_sentence(master, tmp_path):
    from sharedseg.engines.sglang.mooncake import refused_standalone
    g = Group(1, mooncake_config(master, standalone_storage=True), env_of(tmp_path, "1"))
    assert g.p.wait(timeout=120) == 1
    g.p.stdout.close()
    (rank,) = g.ready
    assert refused_standalone() in rank["crash"], rank


# ---- two hosts ----

def rx_bytes(hosts, host):
    """Bytes received on the host's end of the link (its /proc/net/dev)."""
    out = hosts.exec(hosts.ns[host], ["cat", "/proc/net/dev"]).stdout
    for line in out.splitlines():
        name, _, fields = line.partition(":")
        if name.strip() == hosts.dev[host]:
            return int(fields.split()[0])
    raise AssertionError(f"no {hosts.dev[host]} in {out}")


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)")
def test_two_hosts_read_a_prefix_once_per_host(tmp_path):
    """The master and the writing group on host A, the prefetching group
    of two ranks on host B: the bytes B receives for a prefetch are one
    copy of the prefix with the switch, two without."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "netns"))
    sys.path.insert(0, HELPERS)
    from mooncake_master import MooncakeMaster
    from twohosts import Hosts
    pages, ratio = 128, 16.0  # 4.5 MiB a prefix, in pools of 256 pages
    prefix = pages * PAGE_BYTES
    with Hosts() as hosts:
        within = [["ip", "netns", "exec", ns] for ns in hosts.ns]
        with MooncakeMaster(hosts.addr[0], within[0]) as master:
            a = Group(1, mooncake_config(master, hosts.addr[0]),
                      env_of(tmp_path, "1", hosts.addr[0]), within[0], ratio)
            try:
                for seed in (11, 12):
                    assert a.ask(f"store {seed} {pages}")[0]["stored"] == pages * 16
                moved = {}
                for seed, switch in ((11, "1"), (12, None)):
                    b = Group(2, mooncake_config(master, hosts.addr[1]),
                              env_of(tmp_path, switch, hosts.addr[1]), within[1], ratio)
                    try:
                        before = rx_bytes(hosts, 1)
                        got = b.ask(f"prefetch {seed} {pages}")
                        moved[switch] = rx_bytes(hosts, 1) - before
                        all_right(got, pages)
                    finally:
                        b.close()
            finally:
                a.close()
    print(f"prefix {prefix} B; host B received {moved['1']} B with the switch, "
          f"{moved[None]} B without")
    assert prefix <= moved["1"] < 1.2 * prefix, moved
    assert moved[None] >= 2 * prefix, moved
