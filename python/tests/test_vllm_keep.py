# SPDX-License-Identifier: Apache-2.0
"""A vLLM host KV tier that outlives its engine ("sharedseg": {"keep":
NAME}): the host pool named after the keeper, which holds it between
engines. The manager vLLM's spec builds over it, the keeper there, gone and
stopped; the hash-seed rule; and a real engine on vLLM's CPU backend
restarted over the tier its predecessor left, at TP=1 (a crash, and an
engine killed once built) and TP=2, through `sharedseg keep` (the C tool)."""
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import HELPERS, env_with_package, start_keeper

pytestmark = pytest.mark.engine


def stop(p):
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    return err


def kept_pool(keeper):
    """The kept tier as `sharedseg.list_pools()` shows it, or None."""
    import sharedseg
    from sharedseg.engines.vllm.pool import kept_pool_name
    return next((p for p in sharedseg.list_pools() if p["name"] == kept_pool_name(keeper)), None)


def test_keep_is_checked_and_refused_where_it_cannot_serve():
    from sharedseg.engines.base import SegmentRequest
    assert SegmentRequest.parse({"keep": "k", "timeout": 5}, "here", keeps=True).keep == "k"
    with pytest.raises(ValueError, match="only vLLM's adapter keeps"):
        SegmentRequest.parse({"keep": "k"}, "here")
    with pytest.raises(ValueError, match="a keeper holds memfd segments only"):
        SegmentRequest.parse({"keep": "k", "pin": "vmm"}, "here", keeps=True)
    with pytest.raises(ValueError, match="expected a keeper's name"):
        SegmentRequest.parse({"keep": 3}, "here", keeps=True)
    with pytest.raises(ValueError, match=r"numa in here: a host pool \(pool, or keep: the pool "
                                         r"its keeper holds\) takes pages, pin, timeout"):
        SegmentRequest.parse({"keep": "k", "numa": 0}, "here", keeps=True)


def test_unstable_hashes_are_said_with_what_to_set(monkeypatch):
    """NONE_HASH's seed as vLLM resolves it (resolve_none_hash_seed) for
    sha256 and xxhash, with and without PYTHONHASHSEED."""
    from vllm.v1.core import kv_cache_utils as u

    from sharedseg.engines.vllm.pool import unstable_hashes

    def seeded(algo):
        monkeypatch.setattr(u, "_NONE_HASH_SEED", u.resolve_none_hash_seed(algo))

    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    from vllm.utils.hashing import sha256
    seeded(sha256)
    assert unstable_hashes() is None
    seeded(u.xxhash)
    assert "set PYTHONHASHSEED to one value for every engine, or use sha256" in unstable_hashes()
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    seeded(u.xxhash)
    assert unstable_hashes() is None


# ---- the manager vLLM's spec builds, over the kept pool ----

def _spec(keeper, model="tiny", timeout=None):
    """vLLM's spec factory on a one-rank configuration keeping with keeper."""
    import dataclasses

    import vllm_ranks
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory
    ours = {"pages": "base", "keep": keeper}
    if timeout is not None:
        ours["timeout"] = timeout
    config = vllm_ranks.config(0, 1, f"keep-{uuid.uuid4().hex[:8]}", {"sharedseg": ours})
    if model != "tiny":
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, name=model))
    return OffloadingSpecFactory.create_spec(config)


def _key(i):
    from vllm.v1.kv_offload.base import make_offload_key
    return make_offload_key(b"%032d" % i, 0)


def _stores(manager, keys, req="s"):
    from vllm.v1.kv_offload.base import ReqContext
    rc = ReqContext(req_id=req)
    manager.on_new_request(rc)
    out = manager.prepare_store(keys, rc)
    for key, chunk in zip(out.keys_to_store, out.store_spec.block_ids):
        manager.pool.chunk(int(chunk))[:8] = key[:8]  # as the workers' copy would
    manager.complete_store(out.keys_to_store, rc)
    manager.on_request_finished(rc)


def _looked_up(manager, keys, req="l"):
    from vllm.v1.kv_offload.base import ReqContext
    rc = ReqContext(req_id=req)
    manager.on_new_request(rc)
    got = [manager.lookup(k, rc).name for k in keys]
    manager.on_request_finished(rc)
    return got


def test_keep_alone_is_the_pool_its_keeper_holds(caplog):
    """keep alone gives the pool's manager, over the pool named after the
    keeper and left with it: what one engine stored is found by the next,
    after the first is gone; one configured otherwise is refused with the
    field; with no keeper running the tier is the engine's own, said so."""
    from sharedseg import SharedSegmentError
    from sharedseg.engines.vllm.pool import PoolOffloadingManager, kept_pool_name
    keeper = f"vk-{uuid.uuid4().hex[:8]}"
    p = start_keeper(keeper)
    try:
        a = _spec(keeper).get_manager()
        assert type(a) is PoolOffloadingManager and a.name == kept_pool_name(keeper)
        facts = a.pool.info()
        assert facts["created"] and facts["kept"], facts
        _stores(a, [_key(0), _key(1)])
        a.shutdown()  # engine A gone: the keeper alone holds the pool
        listed = kept_pool(keeper)
        assert listed["kept_by"] == keeper and listed["processes"] == [], listed
        with caplog.at_level("INFO", logger="vllm.kv_offload.sharedseg"):
            b = _spec(keeper).get_manager()
        assert "found with 2 chunks stored" in caplog.text and f"kept by '{keeper}'" in caplog.text
        assert _looked_up(b, [_key(0), _key(1), _key(2)]) == ["HIT", "HIT", "MISS"]
        with pytest.raises(SharedSegmentError, match=f"sharedseg setting keep='{keeper}': pool "
                                                     f"'{kept_pool_name(keeper)}' means "
                                                     f"something else: .*model=other"):
            _spec(keeper, model="other").get_manager()
        for bad in ("soon", -1, True, float("nan"), float("inf")):
            with pytest.raises(ValueError, match=f"sharedseg setting timeout={bad!r}: expected "
                                                 f"seconds > 0"):
                _spec(keeper, timeout=bad).get_manager()
        b.shutdown()
    finally:
        assert "let go" in stop(p)
    assert kept_pool(keeper) is None  # the keeper's end: nothing is left
    caplog.clear()
    with caplog.at_level("WARNING"):
        c = _spec(keeper).get_manager()
    facts = c.pool.info()
    assert facts["created"] and not facts["kept"], facts
    assert f"keeper '{keeper}' does not run for this user" in caplog.text
    c.shutdown()


def test_a_stopped_keeper_costs_a_share_of_the_timeout(caplog):
    """A keeper under SIGSTOP: the engine starts within its timeout (half of
    it for the keeper) on a pool of its own, kept by no one, and says so;
    what the keeper holds is there again for the engine after it answers."""
    keeper = f"vs-{uuid.uuid4().hex[:8]}"
    p = start_keeper(keeper)
    try:
        a = _spec(keeper).get_manager()
        _stores(a, [_key(0)])
        a.shutdown()
        p.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            with caplog.at_level("WARNING"):
                b = _spec(keeper, timeout=2).get_manager()
            took = time.monotonic() - t0
        finally:
            p.send_signal(signal.SIGCONT)
        assert took < 15, took  # a bound on a loaded machine (before: 20 s whatever the timeout)
        assert f"keeper '{keeper}' did not answer" in caplog.text, caplog.text
        facts = b.pool.info()
        assert facts["created"] and not facts["kept"], facts
        assert _looked_up(b, [_key(0)]) == ["MISS"]
        b.shutdown()
        c = _spec(keeper).get_manager()
        assert c.pool.info()["kept"] and _looked_up(c, [_key(0)]) == ["HIT"]
        c.shutdown()
    finally:
        stop(p)


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
    (tmp_path / f"{tag}.log").write_text(said)  # the whole of it, beside the test's files
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
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)  # polling the kernel's answer, not ordering processes
    raise AssertionError(f"processes of group {pgid} outlived {seconds} s")


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
        # (its workers, which start first, made the pool: the scheduler found it)
        assert f"kept by '{name}'" in said_a, said_a[-3000:]
        # A is gone; the keeper alone holds the tier, nothing pinned or half stored.
        held = kept_pool(name)
        assert held["kept_by"] == name and held["processes"] == [], held
        assert held["pinned"] == 0 and held["filling"] == 0 and held["used"] >= 4, held

        if tp == 1:  # an engine killed once built: its workers have mapped the pool
            start(tmp_path, model, tp, name, "a2", crash="crash-at-start")
            assert kept_pool(name)["processes"] == []  # nothing of it is left
        b, said_b = start(tmp_path, model, tp, name, "b")
        # B's first request, before B stored anything: the prefix from A's tier,
        # bit for bit what A's own tier hit gave.
        assert b["first"]["cached"] == a["tier"]["cached"] == 64, (a, b)  # four blocks of 16
        assert b["first"]["tokens"] == a["first"]["tokens"]
        assert b["first"]["logprobs"] == a["tier"]["logprobs"]
        assert "found with" in said_b and f"kept by '{name}'" in said_b, said_b[-3000:]
    finally:
        if tp > 1:  # the keeper killed: the kernel frees the tier, nothing is left
            k.kill()
            k.communicate(timeout=30)
        else:
            assert "let go" in stop(k)
    assert kept_pool(name) is None
