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
MIN-all-reduced acks. As two hosts (network namespaces, through
bench/sglang_mooncake.py), the bytes that reach the prefetching host are
one copy of the prefix with the switch, two without (/proc/net/dev)."""
import json
import os
import subprocess
import sys

import pytest

from conftest import HELPERS, ROOT, switched_on

sys.path.insert(0, HELPERS)
from sglang_mooncake_group import Group, mooncake_config  # noqa: E402

pytestmark = pytest.mark.engine

PAGES = 16
PAGE_BYTES = 16 * 2 * 576 * 2  # sglang_ranks: 16 tokens, 2 layers, 576 bf16 a token


def env_of(tmp_path, switch, host="127.0.0.1"):
    env = switched_on(tmp_path, switch) if switch else switched_on(tmp_path, "0")
    env["MC_TCP_BIND_ADDRESS"] = host
    if host != "127.0.0.1":  # a namespace's: gloo between its ranks on its loopback
        env["GLOO_SOCKET_IFNAME"] = "lo"
    return env


@pytest.fixture(scope="module")
def master():
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

@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)")
def test_two_hosts_read_a_prefix_once_per_host():
    """bench/sglang_mooncake.py, small: the master and the writer on host
    A, a group of two ranks on host B prefetching with the switch and
    without. Its rows (what the benchmark prints) say the bytes B received
    per prefetch: one copy of the prefix with the switch, two without; and
    its report section sets them side by side."""
    pages = 128  # 4.5 MiB
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "sglang_mooncake.py"),
                        "--ranks", "2", "--pages", str(pages), "--reps", "1",
                        "--mechanisms", "sharedseg,sglang"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = {r["mechanism"]: dict(r, section="sglang_mooncake")
            for r in map(json.loads, filter(lambda ln: ln.startswith("{"),
                                            p.stdout.splitlines()))}
    ours, theirs = rows["sharedseg"], rows["sglang"]
    prefix = pages * PAGE_BYTES
    assert ours["size"] == theirs["size"] == prefix
    print(f"prefix {prefix} B; host B received {ours['rx_bytes']} B with the switch, "
          f"{theirs['rx_bytes']} B without")
    assert prefix <= ours["rx_bytes"] < 1.2 * prefix, ours
    assert theirs["rx_bytes"] >= 2 * prefix, theirs
    assert ours["pages_fetched"] == [pages // 2] * 2 and theirs["pages_fetched"] == [pages] * 2

    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import report_tools
    section = report_tools.sglang_mooncake_section([ours, theirs])
    assert section.startswith("## SGLang's Mooncake tier: one fetch per host")
    assert "| 4.5 MiB | 2 | sharedseg |" in section and "| 4.5 MiB | 2 | sglang |" in section
    if ours["pages"] == theirs["pages"]:  # the ratio row: on one page kind
        assert f"**{ours['rx_bytes'] / theirs['rx_bytes']:.2f}**" in section


def test_the_documented_line_is_the_configuration_tested():
    """docs/integrations.md's line, through SGLang's own parser: the
    switch, the mooncake backend, and the keys of the extra configuration
    these tests give it (the protocol the tests' is TCP; RDMA in the line)."""
    import argparse
    import shlex

    from sglang.srt.server_args import ServerArgs

    from conftest import doc_block
    argv = shlex.split(doc_block("python/tests/test_sglang_mooncake.py"))
    assert argv[:4] == ["SHAREDSEG_SGLANG=1", "python", "-m", "sglang.launch_server"]
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    args = parser.parse_args(argv[4:])
    assert args.enable_hierarchical_cache and args.hicache_storage_backend == "mooncake"
    extra = json.loads(args.hicache_storage_backend_extra_config)
    master = type("Master", (), dict(rpc="MASTER:50051",
                                     metadata="http://MASTER:8080/metadata"))
    tested = mooncake_config(master)
    assert {k: tested[k] for k in extra} == dict(extra, protocol="tcp")
