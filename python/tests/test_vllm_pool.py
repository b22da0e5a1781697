# SPDX-License-Identifier: Apache-2.0
"""vLLM's host KV tier in the host pool ("sharedseg": {"pool": NAME},
sharedseg.engines.vllm.pool): the manager vLLM's spec builds over a real
pool, two of them as two engines' schedulers; and real engines on vLLM's
CPU backend sharing one pool: one loads what the other stored, one copy of
the pool in /proc, one killed while the other serves, a third served from
what a keeper held, another declaration refused."""
import json
import os
import subprocess
import sys
import uuid

import pytest

from conftest import HELPERS, built, env_with_package, start_keeper
from driven import Driven

pytestmark = pytest.mark.engine


def test_the_pool_setting_is_checked():
    from sharedseg.engines.base import SegmentRequest
    assert SegmentRequest.parse({"pool": "p", "keep": "k"}, "here", keeps=True).pool == "p"
    with pytest.raises(ValueError, match="only vLLM's adapter serves its tier from a host pool"):
        SegmentRequest.parse({"pool": "p"}, "here")
    with pytest.raises(ValueError, match="expected a pool's name"):
        SegmentRequest.parse({"pool": ""}, "here", keeps=True)
    with pytest.raises(ValueError, match="a host pool is a memfd"):
        SegmentRequest.parse({"pool": "p", "pin": "vmm"}, "here", keeps=True)
    with pytest.raises(ValueError, match=r"numa, populate in here: a host pool \(pool, or keep: "
                                         r"the pool its keeper holds\) takes pages, pin, "
                                         r"timeout and keep only"):
        SegmentRequest.parse({"pool": "p", "numa": 0, "populate": "owner"}, "here", keeps=True)


# ---- the manager over a real pool ----

def _spec(name, model="tiny"):
    """vLLM's spec factory on a one-rank configuration naming pool name."""
    import vllm_ranks
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory
    config = vllm_ranks.config(0, 1, f"pool-{uuid.uuid4().hex[:8]}",
                               {"sharedseg": {"pages": "base", "pool": name}})
    if model != "tiny":
        import dataclasses
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, name=model))
    return OffloadingSpecFactory.create_spec(config)


def _request(req_id):
    from vllm.v1.kv_offload.base import ReqContext
    return ReqContext(req_id=req_id)


def _key(i):
    from vllm.v1.kv_offload.base import make_offload_key
    return make_offload_key(b"%032d" % i, 0)


def test_two_engines_managers_share_one_pool():
    """Engine A's scheduler stores blocks; engine B's finds them and pins
    them from its lookup to its load, while A filling the pool twice over
    evicts only what nobody pins; B loads A's bytes from A's chunks, and
    its pins go with its request; a pool every chunk of which is pinned or
    being filled stores nothing (vLLM's None); B's reset forgets the pool's
    blocks for B alone."""
    from sharedseg.engines.vllm.pool import PoolOffloadingManager
    from vllm.v1.kv_offload.base import LookupResult
    name = f"vp-{uuid.uuid4().hex[:10]}"
    spec_a, spec_b = _spec(name), _spec(name)
    a, b = spec_a.get_manager(), spec_b.get_manager()
    assert type(a) is PoolOffloadingManager and spec_a.get_manager() is a
    pool = a.pool
    try:
        assert pool.chunks == spec_a.num_chunks and pool.chunk_size == spec_a.kv_bytes_per_chunk
        ra, rb = _request("a"), _request("b")
        a.on_new_request(ra)
        b.on_new_request(rb)
        keys = [_key(i) for i in range(3)]
        assert [a.lookup(k, ra) for k in keys] == [LookupResult.MISS] * 3
        out = a.prepare_store(keys, ra)
        chunks = out.store_spec.block_ids.tolist()
        assert out.keys_to_store == keys and len(set(chunks)) == 3
        assert b.prepare_store(keys, rb).keys_to_store == []  # A fills them now
        assert b.lookup(keys[0], rb) == LookupResult.MISS  # invisible until published
        for i, chunk in enumerate(chunks):
            pool.chunk(chunk)[:8] = b"block-%02d" % i
        a.complete_store(keys, ra)
        assert [b.lookup(k, rb) for k in keys] == [LookupResult.HIT] * 3  # pinned for B

        n = pool.chunks
        for start in (1000, 1000 + n):  # the second round evicts the first, never B's
            stored = a.prepare_store([_key(i) for i in range(start, start + n - 3)], ra)
            assert stored is not None and len(stored.keys_to_store) == n - 3
            a.complete_store(stored.keys_to_store, ra)
        filling = a.prepare_store([_key(i) for i in range(9000, 9000 + n - 3)], ra)
        assert len(filling.keys_to_store) == n - 3
        assert a.prepare_store([_key(9999)], ra) is None  # all pinned or being filled
        a.complete_store(filling.keys_to_store, ra, success=False)  # given back

        load = b.prepare_load(keys, rb)
        assert load.block_ids.tolist() == chunks
        assert [bytes(pool.chunk(c)[:8]) for c in chunks] == [b"block-%02d" % i for i in range(3)]
        assert pool.info()["pinned"] == 3
        b.on_request_finished(rb)  # ended with its load in flight: the load keeps its pins
        assert pool.info()["pinned"] == 3
        b.complete_load(keys, rb)
        assert pool.info()["pinned"] == 0
        rb1 = _request("b1")
        b.on_new_request(rb1)
        assert b.lookup(keys[1], rb1) == LookupResult.HIT and pool.info()["pinned"] == 1
        b.on_request_finished(rb1)  # what its lookups still pinned goes with it
        assert pool.info()["pinned"] == 0

        b.reset_cache()
        rb2 = _request("b2")
        b.on_new_request(rb2)
        assert b.lookup(keys[0], rb2) == LookupResult.MISS  # B's keys are its own now
        assert a.lookup(keys[0], ra) == LookupResult.HIT    # A's are as they were
    finally:
        a.shutdown()
        b.shutdown()


def test_another_declaration_is_refused_the_pool_by_field():
    from sharedseg import SharedSegmentError
    name = f"vp-{uuid.uuid4().hex[:10]}"
    a = _spec(name).get_manager()
    try:
        with pytest.raises(SharedSegmentError) as refused:
            _spec(name, model="other").get_manager()
        assert str(refused.value) == (
            f"sharedseg setting pool='{name}': pool '{name}' means something else: its field 2 "
            f"is 'model=tiny', this process declares 'model=other' (a pool holds keys of one "
            f"meaning; name another pool)")
        bigger = _spec(name)
        bigger.num_chunks += 1
        with pytest.raises(SharedSegmentError) as refused:
            bigger.get_manager()
        assert "chunks" in str(refused.value)
    finally:
        a.shutdown()


def test_the_workers_region_is_the_pools_chunks():
    """A worker's region over the pool (map-only: no slot taken): row i is
    chunk i, the bytes one engine's scheduler sees are the worker's."""
    import vllm_ranks
    name = f"vp-{uuid.uuid4().hex[:10]}"
    spec = _spec(name)
    manager = spec.get_manager()
    try:
        _, caches = vllm_ranks.kv_caches()
        worker = spec.get_worker(caches)
        region = worker._region
        assert region.segment.name == name and manager.pool.info()["attached"] == [os.getpid()]
        row = spec.kv_bytes_per_chunk
        assert region._base.numel() == spec.num_chunks * row
        manager.pool.chunk(spec.num_chunks - 1)[:6] = b"pooled"
        assert bytes(region._base[(spec.num_chunks - 1) * row:][:6].numpy()) == b"pooled"
        worker.shutdown()
    finally:
        manager.shutdown()


@pytest.mark.parametrize("world", [2, 4])
def test_a_tp_groups_workers_share_the_pool_in_their_slots(vllm_group_run, world):
    """A TP group's workers over the host pool (vllm_ranks.py, vLLM's TP
    group on gloo): each maps the one memfd map-only, its region's row is
    the pool's chunk; a slot per rank (each rank loads its own blocks back)
    or, in the replicated MLA layout, one copy (rank 0 stores, every rank
    loads rank 0's)."""
    per_rank = vllm_group_run(world)
    for scenario, slots in (("pool", list(range(world))), ("pool-replicated", [0] * world)):
        seen = [r[scenario] for r in per_rank]
        assert len({s["inode"] for s in seen}) == 1, seen
        assert [s["slot"] for s in seen] == slots
        for s in seen:
            assert s["cpu_worker"] and s["pool_slot"] == -1 and s["loaded_equal"], s
            assert (s["chunk_size"], s["chunks"]) == (s["row_stride"], s["num_chunks"]), s
        assert all(s["views"][0][1][0] == s["row_stride"] for s in seen), seen  # row i: chunk i


# ---- real engines sharing one pool ----

class Engine(Driven):
    """One engine (helpers/vllm_pool_engine.py), driven one command at a
    time; its workers trace their transfers in TAG.trace."""

    def __init__(self, tmp_path, model, pool, keeper, tag, dtype=None):
        self.trace = tmp_path / f"{tag}.trace"
        super().__init__(tmp_path, tag, "vllm_pool_engine.py", [model, pool, keeper],
                         [dtype] if dtype else [], env=dict(SHAREDSEG_VLLM_TRACE=str(self.trace)))

    def traced(self, op):
        """Its workers' transfers of kind op (cpu_worker's trace lines)."""
        if not self.trace.exists():
            return []
        return [t for t in map(json.loads, self.trace.read_text().splitlines()) if t["op"] == op]


def _pool_listed(name):
    """The pool as `sharedseg ls --json` (the C tool) shows it, or None."""
    out = subprocess.run([built("sharedseg", "the C tool"), "ls", "--json"], check=True,
                         capture_output=True, text=True).stdout
    return next((p for p in json.loads(out)["pools"] if p["name"] == name), None)


def _mapping_groups(inode_of_pool):
    """{process group: set of sseg-pool memfd inodes its processes map},
    from every process's /proc/PID/maps."""
    import glob
    groups = {}
    for maps in glob.glob("/proc/[0-9]*/maps"):
        try:
            pgid = os.getpgid(int(maps.split("/")[2]))
            with open(maps) as f:
                inodes = {int(line.split()[4]) for line in f if "memfd:sseg-pool" in line}
        except (OSError, ProcessLookupError):
            continue
        if inodes:
            groups.setdefault(pgid, set()).update(inodes)
    return groups


@pytest.mark.cpu_backend
def test_engines_of_one_model_share_one_pool_and_a_keeper_keeps_it(tmp_path):
    """Two engines of one model at TP=1 name one pool: B's first request
    loads the prefix A stored, with A's own pool hit's logprobs, from A's
    chunks (one memfd mapped by both, from /proc); A killed while B serves:
    B serves on, the same; both gone, the keeper holds the pool and a third
    engine serves the prefix from it; an engine of another dtype is refused
    the pool with a sentence."""
    model = tmp_path / "model"
    subprocess.run([sys.executable, os.path.join(HELPERS, "vllm_engine.py"), "make", "deepseek",
                    str(model)], env=env_with_package(), check=True, timeout=300)
    name = f"vp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    keeper = start_keeper(name)
    engines = []
    try:
        a = Engine(tmp_path, model, name, name, "a")
        b = Engine(tmp_path, model, name, name, "b")
        engines += [a, b]
        a.next("ready")
        b.next("ready")
        cold = a.ask("serve", "serve")
        assert cold["cached"] == 0
        a.ask("reset", "reset")  # vLLM's own prefix cache: the next pass loads from the pool
        hit = a.ask("serve", "serve")
        assert hit["cached"] == 64 and hit["tokens"] == cold["tokens"]  # four blocks of 16

        first = b.ask("serve", "serve")
        assert first["cached"] == 64 and first["tokens"] == cold["tokens"]
        assert first["logprobs"] == hit["logprobs"]
        stored = {c: crc for t in a.traced("store") for c, crc in zip(t["chunks"], t["rows_crc32"])}
        loaded = [(c, crc) for t in b.traced("load") for c, crc in zip(t["chunks"], t["rows_crc32"])]
        assert loaded and all(stored.get(c) == crc for c, crc in loaded), (stored, loaded)
        assert not b.traced("store")  # B stored nothing: A's blocks were there

        listed = _pool_listed(name)
        assert listed["kept_by"] == name and len(listed["processes"]) == 2, listed
        maps = _mapping_groups(listed["inode"])
        assert maps.get(a.proc.pid) == {listed["inode"]} == maps.get(b.proc.pid), maps

        b.send("loop 3")
        b.next("started")
        a.kill()
        passes = b.next("loop")["passes"]
        assert [(p["cached"], p["tokens"], p["logprobs"]) for p in passes] == \
            [(64, cold["tokens"], hit["logprobs"])] * 3
        b.quit()

        listed = _pool_listed(name)
        assert listed["kept_by"] == name and listed["processes"] == [], listed
        assert listed["used"] >= 4 and listed["pinned"] == 0 and listed["filling"] == 0, listed

        c = Engine(tmp_path, model, name, name, "c")
        d = Engine(tmp_path, model, name, name, "d", dtype="float32")
        engines += [c, d]
        c.next("ready")
        served = c.ask("serve", "serve")
        assert (served["cached"], served["tokens"], served["logprobs"]) == \
            (64, cold["tokens"], hit["logprobs"])
        c.quit()
        said = d.failed()
        assert (f"sharedseg setting pool='{name}': pool '{name}' means something else: its "
                f"field 3 is 'dtype=bfloat16', this process declares "
                f"'dtype=float32'") in said, said
    finally:
        for e in engines:
            e.end()
        keeper.terminate()
        keeper.communicate(timeout=30)
    assert _pool_listed(name) is None
