# SPDX-License-Identifier: Apache-2.0
"""Four ranks spawned with torch.multiprocessing over a gloo group. One job
runs every scenario (spawning 4 interpreters with torch is the slow part);
each test asserts on what every rank recorded. The last two fork pairs of
ranks instead (store_host_exit.py), rank 0 of which hosts the store and
exits the moment its call returns."""
import errno
import json

import pytest

import gloo_ranks
from conftest import free_port

WORLD = 4


@pytest.fixture(scope="module")
def ranks(tmp_path_factory, knobs_steady_module):
    out = tmp_path_factory.mktemp("gloo")
    gloo_ranks.spawn(gloo_ranks.scenarios, WORLD, (WORLD, free_port(), str(out)), timeout=240)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]


@pytest.fixture(scope="module")
def knobs_steady_module():
    # The exact call uses pages="auto": no knob may change under it.
    from conftest import machine_lock
    with machine_lock():
        yield


def each(ranks, scenario):
    for r, res in enumerate(ranks):
        assert res[scenario]["ok"], f"rank {r}:\n{res[scenario]['error']}"
    return [res[scenario]["data"] for res in ranks]


def test_every_rank_reads_every_rank_writes(ranks):
    for r, d in enumerate(each(ranks, "share")):
        assert d["seen"] == [True] * WORLD, f"rank {r} saw {d['seen']}"
        assert d["owner"] == 0 and d["is_owner"] == (r == 0) and d["pages"] == "base"


def test_views_are_zero_copy(ranks):
    assert all(d["zero_copy"] for d in each(ranks, "share"))


def test_segment_outlives_the_object_while_a_tensor_lives(ranks):
    for d in each(ranks, "share"):
        assert d["alive_after_del"] and d["unmapped_with_last_view"]


def test_the_exact_call_with_tp_group(ranks):
    assert all(d["ok"] for d in each(ranks, "exact_call"))


def test_comm_group_alias_and_default_group(ranks):
    for d in each(ranks, "comm_group"):
        assert d == {"comm_group": True, "both_same": True, "default_group": True}


# A larger shape changes the size too; the layout is named, being the cause.
@pytest.mark.parametrize("variant,field", [("transposed", "shape"), ("larger", "shape")])
def test_a_different_shape_on_one_rank_fails_every_rank_naming_it(ranks, variant, field):
    for r, d in enumerate(each(ranks, "mismatch")):
        d = d[variant]
        assert d["raised"], f"rank {r} did not raise"
        # The first differing block and field, with both values.
        assert f"the layouts differ: block 'k': rank 2 declared {field}=" in d["message"], \
            d["message"]
        assert f", rank 0 declared {field}=" in d["message"], d["message"]
        assert d["message"].startswith(f"segment 'py-gloo-mismatch-{variant}': ranks 0-3 "
                                       "failed in complete"), d["message"]
        assert sorted(d["failures"]) == ["0", "1", "2", "3"]


def test_grouped_and_interleaved_layouts_agree_across_ranks(ranks):
    data = each(ranks, "grouped")
    for layout in ("grouped", "interleaved"):
        assert all(d[layout]["ok"] for d in data)
        assert all(d[layout]["offsets"] == data[0][layout]["offsets"] for d in data)
    k, v = data[0]["grouped"]["offsets"]
    assert max(k) < min(v)


def test_read_only_peers(ranks):
    for r, d in enumerate(each(ranks, "readonly")):
        assert d["value"] == 42.0
        assert d["readonly"] == (r != 0) and d["writeable"] == (r == 0)


def test_world_size_and_rank_come_from_the_group(ranks):
    for r, d in enumerate(each(ranks, "defaults_from_group")):
        assert d == {"ok": True, "world_size": WORLD, "rank": r}


def test_a_vllm_style_coordinator_is_used_through_its_cpu_group(ranks):
    for r, d in enumerate(each(ranks, "coordinator")):
        assert d == {"ok": True, "world_size": WORLD, "rank": r, "link": "StoreLink"}


def test_two_tp_groups_in_a_larger_world(ranks):
    for r, d in enumerate(each(ranks, "tp_pairs")):
        pair_owner = r - r % 2
        assert (d["world_size"], d["rank"], d["owner"]) == (2, r % 2, 0)
        assert d["seen"] == pair_owner + 1, d  # each pair its own segment
        refused = d["world_refused"]
        assert refused["raised"] and refused["type"] == "ValueError", refused
        assert "default torch.distributed group has 4 ranks" in refused["message"], refused


def test_groups_torch_does_not_know(ranks):
    import torch
    torch2 = int(torch.__version__.split(".")[0]) >= 2
    for r, d in enumerate(each(ranks, "unregistered")):
        # A raw c10d backend has no store: its own all-gather, polled.
        assert d["raw_gloo"] == {"ok": True, "world_size": WORLD, "rank": r,
                                 "link": "CollectiveLink"}, d
        assert d["stateless_group"] == {"ok": True, "world_size": WORLD, "rank": r,
                                        "link": "StoreLink"}, d
        if torch2:
            # torch 2.x groups carry their store (get_group_store).
            assert d["stateless_pg"] == {"ok": True, "world_size": WORLD, "rank": r,
                                         "link": "StoreLink"}, d
        else:
            assert "stateless_pg" not in d


def test_an_owner_past_the_timeout_fails_every_rank_and_the_group_stays_usable(ranks):
    for r, d in enumerate(each(ranks, "owner_stalled")):
        assert d["raised"] and d["errno"] == errno.ETIMEDOUT, d
        if r == 0:
            # Arrives after 4 s and stops at once, with the peers' reason.
            assert "rank " in d["message"] and "gave up" in d["message"], d
            assert "arrived later" in d["message"], d
            assert d["after"] < 4.0 + 1.0, d
        else:
            assert "rank 0 did not reach the blobs exchange within 1.5 s" in d["message"], d
            assert "stays usable" in d["message"] and d["missing"] == [0], d
            assert d["after"] < 3.0, d
        assert d["barrier"] and d["next"] == [WORLD, r], d


def test_one_rank_with_a_bad_argument_is_every_ranks_value_error(ranks):
    for r, d in enumerate(each(ranks, "bad_argument")):
        pages, size = d["pages"], d["world_size"]
        for got in (pages, size):
            assert got["raised"] and got["value_error"] and got["segment_error"], got
            assert got["errno"] == errno.EINVAL and got["type"] == "SharedSegmentValueError"
        assert "rank 2 failed in setup: unknown pages 'hugepages'" in pages["message"], pages
        assert "rank 1 failed in setup: world_size=3, but" in size["message"], size
        assert d["barrier"]


def test_after_a_rank_failed_or_missed_a_call_the_next_calls_work(ranks):
    for r, d in enumerate(each(ranks, "back_in_step")):
        two = d["two"]
        assert two["raised"] and two["type"] == "SharedSegmentValueError", two
        assert "rank 1 failed in setup: comm_group= and tp_group= name different" \
            in two["message"], two
        missed = d["missed"]
        if r == 3:
            assert missed["type"] == "ValueError" and "either comm_group" in missed["message"]
        else:
            assert missed["errno"] == errno.ETIMEDOUT and missed["missing"] == [3], missed
        assert d["next"] == [True, True] and d["barrier"], d


def test_a_collective_timeout_leaves_the_all_gather_posted_not_aborted(ranks):
    for r, d in enumerate(each(ranks, "collective_timeout")):
        assert d["raised"] and d["errno"] == errno.ETIMEDOUT, d
        assert "did not complete within 1.5 s" in d["message"], d
        assert "destroy it" in d["message"], d
        if r != 3:
            assert d["pending_completed"] is True, d


def store_host_exits(scenario, runs=10):
    """Rank 1's outcome in each of runs runs of store_host_exit.py."""
    import os
    import subprocess
    import sys

    from conftest import HELPERS, env_with_package
    done = subprocess.run([sys.executable, os.path.join(HELPERS, "store_host_exit.py"), scenario,
                           str(runs)], capture_output=True, text=True, timeout=240,
                          env=env_with_package())
    assert done.returncode == 0, done.stderr[-3000:]
    got = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(got) == runs, done.stdout + done.stderr[-3000:]
    return got


def test_the_store_host_leaving_at_once_after_an_agreed_error_leaves_it_to_the_others():
    """Rank 0 hosts the TCPStore and exits the moment it has the agreed
    error: rank 1 still reads the same error, never a broken pipe."""
    for got in store_host_exits("error"):
        assert got == {"ok": False, "error": "SharedSegmentValueError: segment 'py-store-exit': "
                       "ranks 0-1 failed in complete: rank 1 declared size=8 KiB, rank 0 "
                       "declared size=4 KiB"}, got


def test_the_store_host_leaving_at_once_after_a_segment_leaves_the_others_theirs():
    for got in store_host_exits("success"):
        assert got == {"ok": True}, got
