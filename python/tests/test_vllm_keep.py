# SPDX-License-Identifier: Apache-2.0
"""A vLLM host KV tier that outlives its engine ("sharedseg": {"keep":
NAME}, sharedseg.vllm_keep): the index of blocks in the segment, its
writes bracketed so that a listing is never torn, and a real engine on
vLLM's CPU backend restarted over the tier its predecessor left, at TP=1
and TP=2, through `sharedseg keep` (the C tool)."""
import dataclasses
import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import HELPERS, env_with_package, start_keeper
from sharedseg.vllm_keep import ENGINE

pytestmark = pytest.mark.engine


def stop(p):
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    return err


# ---- the index ----

def _index(chunks=4):
    from sharedseg.vllm_keep import TierIndex, index_bytes
    return TierIndex(memoryview(bytearray(index_bytes(chunks))), chunks)


def test_new_memory_holds_no_index_and_a_started_one_lists_what_is_complete():
    index = _index()
    assert index.kept_description() is None  # zeros: no predecessor
    index.start({"model": "m"})
    assert index.kept_description() == {"model": "m"} and list(index.listed()) == []
    index.list(2, b"k" * 36)
    index.list(0, b"a" * 36)
    assert list(index.listed()) == [(0, b"a" * 36), (2, b"k" * 36)]
    index.unlist(2)
    assert list(index.listed()) == [(0, b"a" * 36)]
    index.start({"model": "m"})  # started again: nothing listed
    assert list(index.listed()) == []


def test_a_listing_cut_short_is_not_listed():
    """A scheduler killed between the bracket's writes leaves an odd
    sequence number: the entry reads as unlisted, whatever its key bytes."""
    import struct

    from sharedseg.vllm_keep import INDEX_HEADER, ENTRY
    index = _index()
    index.start({})
    index.list(1, b"x" * 36)
    seq = struct.unpack_from("<Q", index.buf, INDEX_HEADER + ENTRY)[0]
    struct.pack_into("<Q", index.buf, INDEX_HEADER + ENTRY, seq + 1)  # the first write of the next
    assert list(index.listed()) == []


def test_keys_the_index_cannot_hold_are_refused():
    index = _index()
    with pytest.raises(ValueError, match="a key of 65 bytes"):
        index.list(0, b"x" * 65)


def test_what_differs_is_said_part_by_part():
    from sharedseg.vllm_keep import differences
    assert differences({"model": "a", "tp_size": 1}, {"model": "b", "tp_size": 1}) == \
        "model: kept 'a', now 'b'"


def test_unstable_hashes_are_said_with_what_to_set(monkeypatch):
    """NONE_HASH's seed as vLLM resolves it (resolve_none_hash_seed) for
    sha256 and xxhash, with and without PYTHONHASHSEED."""
    from vllm.v1.core import kv_cache_utils as u

    from sharedseg.vllm_keep import unstable_hashes

    def seeded(algo):
        monkeypatch.setattr(u, "_NONE_HASH_SEED", u.resolve_none_hash_seed(algo))

    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    from vllm.utils.hashing import sha256
    seeded(sha256)
    assert unstable_hashes() is None
    seeded(u.xxhash)
    assert "set PYTHONHASHSEED to one value for every start, or use sha256" in unstable_hashes()
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    seeded(u.xxhash)
    assert unstable_hashes() is None


def test_keep_is_refused_where_it_cannot_serve():
    from sharedseg.engines.base import SegmentRequest
    with pytest.raises(ValueError, match="only vLLM's adapter keeps"):
        SegmentRequest.parse({"keep": "k"}, "here")
    with pytest.raises(ValueError, match="a keeper holds memfd segments only"):
        SegmentRequest.parse({"keep": "k", "pin": "vmm"}, "here", keeps=True)
    with pytest.raises(ValueError, match="expected a keeper's name"):
        SegmentRequest.parse({"keep": 3}, "here", keeps=True)


# ---- a real engine, restarted ----

def start(tmp_path, model_dir, tp, name, tag, crash=""):
    """One engine's start; crash ("crash": once it has served,
    "crash-at-start": once it is built): it kills its whole process group
    with SIGKILL, and this waits until none of it is left."""
    out = tmp_path / f"{tag}.json"
    proc = subprocess.Popen([sys.executable, os.path.join(HELPERS, "vllm_keep_engine.py"),
                             str(model_dir), str(tp), name, str(out)] + ([crash] if crash else []),
                            env=env_with_package(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    said, _ = proc.communicate(timeout=420)  # vLLM logs to stdout
    if crash:
        assert proc.returncode == -signal.SIGKILL, said[-4000:]
        gone(proc.pid)
    else:
        assert proc.returncode == 0, said[-4000:]
    assert out.exists(), said[-4000:]
    return json.loads(out.read_text()), said


def gone(pgid, seconds=60):
    """Every process of the group pgid has exited (the kernel has freed
    what they mapped)."""
    import time
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)  # polling the kernel's answer, not ordering processes
    raise AssertionError(f"processes of group {pgid} outlived {seconds} s")


def tier(name):
    import sharedseg
    from sharedseg.vllm_keep import segment_name
    return [s for s in sharedseg.list_segments() if s["name"] == segment_name(name)]


@pytest.mark.cpu_backend
@pytest.mark.parametrize("tp", [1, 2])
def test_a_restarted_engine_serves_from_the_tier_its_predecessor_left(tmp_path, tp):
    model = tmp_path / "model"
    subprocess.run([sys.executable, os.path.join(HELPERS, "vllm_engine.py"), "make", "deepseek",
                    str(model)], env=env_with_package(), check=True, timeout=300)
    name = f"vk{tp}-{os.getpid()}"
    k = start_keeper(name)
    try:
        # At TP=1 engine A crashes (SIGKILL, every process of it) once it has
        # served; at TP=2 it shuts down: either way the tier stays.
        a, said_a = start(tmp_path, model, tp, name, "a", crash="crash" if tp == 1 else "")
        assert a["first"]["cached"] == 0, a  # a new tier
        assert a["tier"]["cached"] > 0, a    # this engine's own stores, from the tier
        assert "held no index for it" in said_a
        # A is gone; the keeper alone holds the tier: one segment, one copy.
        held = tier(name)
        assert len(held) == 1 and held[0]["kept_by"] == name, held
        assert [p["keeper"] for p in held[0]["processes"]] == [name], held

        if tp == 1:  # an engine killed while it attaches: its workers have mapped the tier
            start(tmp_path, model, tp, name, "a2", crash="crash-at-start")
            assert [p["keeper"] for p in tier(name)[0]["processes"]] == [name]  # nothing else
        b, said_b = start(tmp_path, model, tp, name, "b")
        # B's first request, before B stored anything: the prefix from A's tier,
        # bit for bit what A's own tier hit gave.
        assert b["first"]["cached"] == a["tier"]["cached"] == 64, (a, b)  # four blocks of 16
        assert b["first"]["tokens"] == a["first"]["tokens"]
        assert b["first"]["logprobs"] == a["tier"]["logprobs"]
        assert "chunks kept from the last engine" in said_b, said_b[-3000:]
    finally:
        if tp > 1:  # the keeper killed: the kernel frees the tier, nothing is left
            k.kill()
            k.communicate(timeout=30)
        else:
            assert "let go" in stop(k)
    assert tier(name) == []



# ---- the manager over a kept segment, the engine killed at each step ----

CHUNKS, ROW = 2, 8192


def _tier_segment(keeper_name, name, engine="e", chunks=CHUNKS):
    """The tier's segment as one rank's group makes it (its index after the
    chunks), left with the keeper, claimed for engine as the group's owner
    claims it (sharedseg.vllm's create_region)."""
    import sharedseg
    from sharedseg.engines.vllm.rows import region_blocks
    from sharedseg.vllm_keep import claim_tier, index_bytes
    seg = sharedseg.create_shared_segment(
        name, world_size=1, blocks=region_blocks(chunks, ROW, index_bytes(chunks)), layout="grouped",
        pages="base", keeper=keeper_name)
    claim_tier(seg.buffer(), chunks, ROW, engine)
    return seg


def _manager(keeper_name, name, model="m", engine="e"):
    """A scheduler's manager, as a (re)started engine builds it: vLLM's
    own, made a kept one (the spec's get_manager does the same)."""
    from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager

    from sharedseg.vllm_keep import KeptOffloadingManager
    return KeptOffloadingManager.adopt(
        CPUOffloadingManager(num_chunks=CHUNKS, cache_policy="lru"), keeper=keeper_name,
        name=name, row_stride=ROW, desc=lambda: {"model": model}, engine_id=engine)


def _looked_up(manager, keys):
    from vllm.v1.kv_offload.base import ReqContext
    rc = ReqContext(req_id="look")
    manager.on_new_request(rc)
    return [manager.lookup(k, rc).name for k in keys]


def test_the_kept_manager_is_the_one_vllms_spec_builds():
    """With keep, get_manager gives vLLM's own manager as vLLM's
    CPUOffloadingSpec builds it, with every argument of that release
    (0.33 added info), made a kept one in place: nothing of vLLM's is
    copied here to drift from it. Only the keep's state is ours."""
    import vllm_ranks
    from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    from sharedseg.vllm_keep import KeptOffloadingManager
    extra = {"store_threshold": 3, "max_tracker_size": 17}
    ours = OffloadingSpecFactory.create_spec(vllm_ranks.config(
        0, 1, "kept-manager", dict(extra, sharedseg={"pages": "base", "keep": "k"})))
    theirs = CPUOffloadingSpec(vllm_ranks.config(0, 1, "vllm-manager", extra))
    kept, vllms = ours.get_manager(), theirs.get_manager()
    assert type(kept) is KeptOffloadingManager and ours.get_manager() is kept
    keep_state = {"_keep", "_desc", "_index", "_mapping", "_attach_state", "_retry_at",
                  "_said_long"}
    assert set(vars(kept)) - keep_state == set(vars(vllms))
    for name, value in vars(vllms).items():
        assert type(vars(kept)[name]) is type(value), name
        if isinstance(value, (int, float, str, bool, type(None))):
            assert vars(kept)[name] == value, name
    assert (kept.store_threshold, kept.max_tracker_size) == (3, 17)  # the user's, through vLLM
    # What the index keeps of the engine's configuration, from the config
    # vLLM gives the spec: another model there is what a restart discards
    # for (the discard itself: the killed-at-each-step test below).
    from sharedseg.vllm_keep import description, differences
    other = dataclasses.replace(ours.config, model=dataclasses.replace(ours.config.model,
                                                                       name="other"))
    assert kept._desc() == description(ours.config)
    assert differences(description(ours.config), description(other)) == \
        "model: kept 'tiny', now 'other'"
    if ENGINE.release() != "0.32":  # 0.33's info: the facts it reports, a dict
        assert kept.config_info() == vllms.config_info() and kept.config_info()[0]
    with pytest.raises(TypeError, match="sharedseg keep serves vLLM's CPUOffloadingManager"):
        KeptOffloadingManager.adopt(object(), keeper="k", name="n", row_stride=1, desc=None,
                                    engine_id="e")


def test_only_completed_stores_survive_an_engine_killed_at_each_step(caplog):
    """Each "restart" is a new manager over the kept segment, the last one
    dropped where it stood (as a killed scheduler leaves it): a store not
    completed is never listed, a listed chunk given to a new store is
    unlisted before its bytes change, and another configuration discards
    what is listed."""
    from vllm.v1.kv_offload.base import ReqContext, make_offload_key

    from sharedseg.vllm_keep import segment_name
    k0, k1, k2, k3 = (make_offload_key(bytes([i]) * 32, 0) for i in range(4))
    name_k = f"vm-{os.getpid()}"
    name = segment_name(name_k)
    p = start_keeper(name_k)
    try:
        seg = _tier_segment(name_k, name)
        seg.close()  # the workers' group ends; the keeper holds the tier
        a = _manager(name_k, name)
        rc = ReqContext(req_id="a")
        a.on_new_request(rc)
        assert a.prepare_store([k0, k1], rc).keys_to_store == [k0, k1]
        a.complete_store([k0], rc)  # k1's store is still in flight when A dies
        a.close()
        b = _manager(name_k, name)
        assert _looked_up(b, [k0, k1]) == ["HIT", "MISS"]
        # B stores two keys: one free chunk and k0's, evicted for it; B dies
        # before either store completes: k0 is not listed on a chunk whose
        # bytes B's store may have half written.
        rc = ReqContext(req_id="b")
        b.on_new_request(rc)
        out = b.prepare_store([k2, k3], rc)
        assert out.evicted_keys == [k0]
        b.close()
        c = _manager(name_k, name)
        assert _looked_up(c, [k0, k1, k2, k3]) == ["MISS"] * 4
        # A key longer than the index holds is served, and not kept.
        long_key = make_offload_key(b"L" * 80, 0)
        rc = ReqContext(req_id="c")
        c.on_new_request(rc)
        c.prepare_store([k2, long_key], rc)
        with caplog.at_level("WARNING", logger="vllm.kv_offload.sharedseg"):
            c.complete_store([k2, long_key], rc)
        assert "block keys of 84 bytes are not kept (the index holds 64)" in caplog.text
        assert _looked_up(c, [k2, long_key]) == ["HIT", "HIT"]
        c.close()
        c2 = _manager(name_k, name)
        assert _looked_up(c2, [k2, long_key]) == ["HIT", "MISS"]
        c2.close()
        # Another configuration: what is listed is discarded, and said why.
        with caplog.at_level("WARNING", logger="vllm.kv_offload.sharedseg"):
            d = _manager(name_k, name, model="another")
            assert _looked_up(d, [k2]) == ["MISS"]
        d.close()
        assert "configured otherwise (model: kept 'm', now 'another')" in caplog.text
    finally:
        err = stop(p)
    assert "let go" in err
    # No keeper now: a warning, and the manager works as vLLM's own.
    caplog.clear()
    with caplog.at_level("WARNING", logger="vllm.kv_offload.sharedseg"):
        e = _manager(name_k, name)
        assert _looked_up(e, [k2]) == ["MISS"]
    assert f"keeper '{name_k}' does not run for this user" in caplog.text
    assert "this engine's tier is its own, and will not outlive it" in caplog.text


# A scheduler that holds the tier's index, in a process of its own, until
# its stdin closes.
HOLDER = """
import sys
from vllm.v1.kv_offload.base import ReqContext
from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager
from sharedseg.vllm_keep import KeptOffloadingManager
m = KeptOffloadingManager.adopt(CPUOffloadingManager(num_chunks=int(sys.argv[4]),
                                                     cache_policy="lru"),
                                keeper=sys.argv[1], name=sys.argv[2], row_stride=int(sys.argv[3]),
                                desc=lambda: {"model": "m"}, engine_id="e")
m.on_new_request(ReqContext(req_id="hold"))
print("holds", flush=True)
sys.stdin.read()
"""


def test_a_second_engine_on_a_tier_in_use_is_refused_at_its_first_request():
    """Two engines on one keeper name would write each other's chunks: the
    second one's scheduler refuses every request, with a sentence, while
    the first runs, and serves once it has gone."""
    from sharedseg.vllm_keep import segment_name
    name_k = f"vb-{os.getpid()}"
    name = segment_name(name_k)
    p = start_keeper(name_k)
    try:
        _tier_segment(name_k, name).close()
        first = subprocess.Popen([sys.executable, "-c", HOLDER, name_k, name, str(ROW),
                                  str(CHUNKS)], env=env_with_package(), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        assert first.stdout.readline() == "holds\n"  # its word: a barrier
        second = _manager(name_k, name)
        for _ in range(2):  # not once only: no store may slip through
            with pytest.raises(RuntimeError, match=f"another engine serves from tier '{name}' "
                                                   f"\\(keeper '{name_k}'\\) now"):
                _looked_up(second, [b"k" * 36])
        first.stdin.close()
        assert first.wait(timeout=60) == 0
        assert _looked_up(second, [b"k" * 36]) == ["MISS"]  # the first has gone
        second.close()
    finally:
        stop(p)
