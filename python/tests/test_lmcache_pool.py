# SPDX-License-Identifier: Apache-2.0
"""LMCache's host tier in the host pool (sharedseg.engines.lmcache.pool):
instances of LMCache's own engine, built by LMCacheEngineBuilder from
docs/integrations.md's configuration in separate processes
(helpers/lmcache_pool_engine.py), share one pool: what one stores the
other retrieves, stored once; one killed while it pins; another model
refused."""
import uuid

import pytest

from conftest import doc_block
from driven import Driven

pytestmark = pytest.mark.engine

DOC = "python/tests/test_lmcache_pool.py"
SIZE_GB = 4 / 1024  # the pool's and LMCache's CPU tier's: 4 MiB, a test's size
TOKENS = 64         # four chunks of 16
WANT = [[start, [float(start + 1)]] for start in range(0, TOKENS, 16)]


def config_file(tmp_path, pool):
    """The documented configuration, at a test's size and with a pool name
    of this test's own (copies of it may run at once)."""
    import yaml
    cfg = yaml.safe_load(doc_block(DOC))
    cfg["max_local_cpu_size"] = SIZE_GB
    cfg["extra_config"]["sharedseg.pool"] = pool
    cfg["extra_config"]["sharedseg.pool_size"] = SIZE_GB
    path = tmp_path / f"{pool}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def instance(tmp_path, config, tag, model=""):
    return Driven(tmp_path, tag, "lmcache_pool_engine.py", [], [model] if model else [],
                  env=dict(LMCACHE_CONFIG_FILE=str(config)))


def test_instances_share_one_pool(tmp_path):
    """A stores four chunks: the pool holds them once; B retrieves them from
    the pool, each chunk's bytes its own, and storing them again stores
    nothing; A's own CPU tier emptied, A's come back from the pool too."""
    pool = f"lp-{uuid.uuid4().hex[:10]}"
    config = config_file(tmp_path, pool)
    a, b = instance(tmp_path, config, "a"), instance(tmp_path, config, "b")
    try:
        ready = a.next("ready")
        assert ready["plugin"] == "HostPoolBackend", ready
        assert ready["backends"] == ["LocalCPUBackend", "sharedseg_pool"], ready
        b.next("ready")
        facts = a.ask(f"store {TOKENS}", "store")["facts"]
        assert (facts["used"], facts["stores"]) == (4, 4), facts
        got = b.ask(f"retrieve {TOKENS}", "retrieve")
        assert got["found"] == TOKENS and got["retrieved"] == TOKENS, got
        assert got["chunks"] == WANT, got
        assert got["facts"]["pinned"] == 0 and got["facts"]["hits"] >= 4, got
        facts = b.ask(f"store {TOKENS}", "store")["facts"]
        assert (facts["used"], facts["stores"]) == (4, 4), facts  # stored once a host
        a.ask("drop-local", "drop-local")
        got = a.ask(f"retrieve {TOKENS}", "retrieve")
        assert got["retrieved"] == TOKENS and got["chunks"] == WANT, got
        a.quit()
        b.quit()
    finally:
        a.end()
        b.end()


def test_a_killed_instances_pins_come_back(tmp_path):
    """A looks the chunks up with pin (its own CPU tier emptied: the pool's
    are pinned) and is SIGKILLed holding the pins;
    the next instance to open the pool takes them back (the kernel's word)
    and retrieves the same bytes. B keeps the pool open meanwhile."""
    pool = f"lp-{uuid.uuid4().hex[:10]}"
    config = config_file(tmp_path, pool)
    a, b = instance(tmp_path, config, "a"), instance(tmp_path, config, "b")
    c = None
    try:
        a.next("ready")
        b.next("ready")
        a.ask(f"store {TOKENS}", "store")
        a.ask("drop-local", "drop-local")  # so that its lookup pins the pool's chunks
        pinned = a.ask(f"pin {TOKENS}", "pin")
        assert pinned["found"] == TOKENS and pinned["facts"]["pinned"] == 4, pinned
        a.kill()
        c = instance(tmp_path, config, "c")
        c.next("ready")
        got = c.ask(f"retrieve {TOKENS}", "retrieve")
        assert got["chunks"] == WANT and got["facts"]["pinned"] == 0, got
        assert got["facts"]["reclaims"] >= 1, got
        c.quit()
        b.quit()
    finally:
        for i in (a, b, c):
            if i is not None:
                i.end()


def test_another_model_is_refused_the_pool(tmp_path):
    pool = f"lp-{uuid.uuid4().hex[:10]}"
    config = config_file(tmp_path, pool)
    a = instance(tmp_path, config, "a")
    other = None
    try:
        a.next("ready")
        other = instance(tmp_path, config, "other", model="-other")
        said = other.failed()
        assert (f"sharedseg.engines.lmcache.pool: extra_config sharedseg.pool='{pool}': pool "
                f"'{pool}' means something else: its field 2 is 'model=tiny-mla', this process "
                f"declares 'model=tiny-mla-other'") in said, said
        a.quit()
    finally:
        a.end()
        if other is not None:
            other.end()


def test_a_remote_tier_beside_the_pool(tmp_path):
    """LMCache's Mooncake store (mooncakestore://, a real master on
    127.0.0.1) beside the pool, as a cluster runs it: instance A stores
    into its CPU tier, the pool and Mooncake; B, on a pool of its own (as
    on another host), retrieves A's chunks from Mooncake, bytes right; C,
    on A's pool, retrieves them too, bytes right, and stores nothing again.
    LMCache asks its remote tier before any storage plugin: C's chunks come
    from Mooncake while it holds them (docs/integrations.md says so), and
    from the pool once Mooncake holds them no more."""
    import yaml
    from mooncake_master import CLIENT_ENV, MooncakeMaster
    pool = f"lr-{uuid.uuid4().hex[:10]}"
    with MooncakeMaster() as master:
        def config(name):
            path = config_file(tmp_path, name)
            cfg = yaml.safe_load(path.read_text())
            cfg["remote_url"] = f"mooncakestore://{master.rpc}/"
            cfg["remote_serde"] = "naive"
            # Mooncake 0.3.13's setup names the master master_server_addr,
            # where LMCache 0.5.6 passes master_server_address (which it
            # ignores): its mooncake_ prefix passes the name through
            cfg["extra_config"].update(
                local_hostname="127.0.0.1", metadata_server=master.metadata,
                mooncake_master_server_addr=master.rpc, protocol="tcp",
                global_segment_size=64 << 20, local_buffer_size=16 << 20)
            path.write_text(yaml.safe_dump(cfg))
            return path

        mine, other = config(pool), config(f"{pool}-b")
        a = Driven(tmp_path, "a", "lmcache_pool_engine.py", [], [],
                   env=dict(CLIENT_ENV, LMCACHE_CONFIG_FILE=str(mine)))
        b = Driven(tmp_path, "b", "lmcache_pool_engine.py", [], [],
                   env=dict(CLIENT_ENV, LMCACHE_CONFIG_FILE=str(other)))
        c = Driven(tmp_path, "c", "lmcache_pool_engine.py", [], [],
                   env=dict(CLIENT_ENV, LMCACHE_CONFIG_FILE=str(mine)))
        try:
            ready = a.next("ready")
            assert ready["backends"][0] == "LocalCPUBackend" and \
                ready["backends"][-1] == "sharedseg_pool" and \
                any(n.startswith("RemoteBackend") for n in ready["backends"]), ready
            b.next("ready")
            c.next("ready")
            facts = a.ask(f"store {TOKENS}", "store")["facts"]
            assert (facts["used"], facts["stores"]) == (4, 4), facts
            settled = a.ask(f"settle {TOKENS}", "settle")
            assert settled == dict(op="settle", remote=1, in_flight=0, found=TOKENS,
                                   put_failed=0), settled
            got = b.ask(f"retrieve {TOKENS}", "retrieve")
            assert got["found"] == TOKENS and got["chunks"] == WANT, got
            assert got["facts"]["used"] == 0, got  # B's pool: nothing of it came from there
            got = c.ask(f"retrieve {TOKENS}", "retrieve")
            assert got["found"] == TOKENS and got["chunks"] == WANT, got
            assert got["facts"]["hits"] == 0, got  # LMCache asked Mooncake first
            facts = c.ask(f"store {TOKENS}", "store")["facts"]
            assert (facts["used"], facts["stores"]) == (4, 4), facts  # once a host
            # Mooncake holds them no more (evicted there, or gone with the
            # client whose segment held them), once C's own puts of them to
            # Mooncake have ended (else one landing after the drop puts a
            # chunk back)
            assert c.ask(f"settle {TOKENS}", "settle")["in_flight"] == 0
            dropped = a.ask(f"drop-remote {TOKENS}", "drop-remote")
            assert (dropped["stores"], dropped["removed"]) == (1, 4), dropped
            c.ask("drop-local", "drop-local")
            hits = c.ask(f"retrieve {TOKENS}", "retrieve")
            assert hits["found"] == TOKENS and hits["chunks"] == WANT, hits
            assert hits["facts"]["hits"] >= facts["hits"] + 4, (facts, hits)  # from the pool
            for x in (a, b, c):
                x.quit()
        finally:
            for x in (a, b, c):
                x.end()


def test_what_the_plugin_cannot_serve_is_refused_with_a_sentence():
    """No pool name, no size, and no LMCache CPU tier in front (the
    scheduler role, or max_local_cpu_size 0)."""
    from lmcache.v1.config import LMCacheEngineConfig

    from sharedseg.engines.lmcache.pool import HostPoolBackend
    cfg = LMCacheEngineConfig.from_defaults(chunk_size=16)
    for extra, cpu, said in (
            ({}, object(), "extra_config sharedseg.pool: expected the pool's name, got None"),
            ({"sharedseg.pool": "p"}, None, "set max_local_cpu_size above 0"),
            ({"sharedseg.pool": "p", "sharedseg.pool_size": "big"}, object(),
             "extra_config sharedseg.pool_size: expected the pool's size in GB, got 'big'")):
        cfg.extra_config = extra
        with pytest.raises(SystemExit) as e:
            HostPoolBackend(config=cfg, dst_device="cpu", metadata=None, local_cpu_backend=cpu)
        assert said in str(e.value), e.value
        assert str(e.value).startswith("sharedseg.engines.lmcache.pool: ")
