# SPDX-License-Identifier: Apache-2.0
"""A drop-in for Mooncake's shared segment: one program written against
mooncake.shared_segment (helpers/segment_compat.py: Mooncake's positional
call, the owner writing, every rank reading, the errors a program meets)
runs unchanged on sharedseg, and every rank sees the same as on Mooncake:
the same views, the same bytes, the same errors caught. On the PyPI leg,
where `make deps` installs Mooncake's CPU build (0.3.13.post1)."""
import importlib.util
import inspect

import pytest

from conftest import env_with_package, run_rank_script

pytestmark = pytest.mark.engine
MOONCAKE = "mooncake.shared_segment"


def test_mooncake_is_installed():
    assert importlib.util.find_spec("mooncake") is not None, \
        "no Mooncake in this environment: make deps installs it in the engines' environment"


def test_the_positional_arguments_are_mooncakes():
    """Mooncake's positional parameters are ours, in its order; what it
    takes by keyword only (tp_group) we take by keyword too."""
    import sharedseg
    from mooncake import shared_segment
    theirs = inspect.signature(shared_segment.create_shared_segment).parameters
    ours = inspect.signature(sharedseg.create_shared_segment).parameters
    positional = [n for n, p in theirs.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional == [n for n, p in ours.items()
                          if p.kind is p.POSITIONAL_OR_KEYWORD][:len(positional)]
    for n, p in theirs.items():
        assert n in ours, n
        if p.default is not p.empty and n != "owner_rank":  # ours: each host's lowest rank
            assert ours[n].default == p.default, n


@pytest.mark.parametrize("world", [2, 3])
def test_one_program_runs_unchanged_on_both(tmp_path, world):
    env = env_with_package(MC_TCP_BIND_ADDRESS="127.0.0.1")
    theirs = run_rank_script(tmp_path, "segment_compat.py", MOONCAKE, world, env=env)
    ours = run_rank_script(tmp_path, "segment_compat.py", "sharedseg", world, env=env)
    for rank in range(world):
        assert ours[rank] == theirs[rank], (rank, ours[rank], theirs[rank])
    # What they agree on is what a program needs: the owner's bytes on
    # every rank, and each mistake raised as SharedSegmentError.
    assert len({tuple(r["crc"]) for r in ours}) == 1 and ours[0]["zero"]
    for what in ("bad_block", "disagree", "unknown_block"):
        assert all(r[what] == ["SharedSegmentError", True] for r in ours), what
