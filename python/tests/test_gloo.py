"""Four ranks spawned with torch.multiprocessing over a gloo group. One job
runs every scenario (spawning 4 interpreters with torch is the slow part);
each test asserts on what every rank recorded."""
import json

import pytest

import gloo_ranks
from conftest import free_port

WORLD = 4


@pytest.fixture(scope="module")
def ranks(tmp_path_factory, knobs_steady_module):
    out = tmp_path_factory.mktemp("gloo")
    gloo_ranks.spawn(gloo_ranks.scenarios, WORLD, (WORLD, free_port(), str(out)), timeout=150)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]


@pytest.fixture(scope="module")
def knobs_steady_module():
    # The exact call uses pages="auto": no knob may change under it.
    import fcntl
    with open("/tmp/sharedseg-test-machine.lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        yield
        fcntl.flock(f, fcntl.LOCK_UN)


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
