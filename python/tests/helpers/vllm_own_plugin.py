# SPDX-License-Identifier: Apache-2.0
"""A pytest plugin (-p vllm_own_plugin) under which vLLM's own offloading
tests (tests/v1/kv_offload of vLLM's sdist, unchanged) run on sharedseg's
classes:
- where they construct vLLM's CPUOffloadingManager (cpu/test_manager.py),
  each gets vLLM's own made a kept one (KeptOffloadingManager.adopt, as
  SharedSegOffloadingSpec.get_manager does with "keep"), over a tier of its
  own that one keeper holds;
- where they name vLLM's CPUOffloadingSpec (test_factory.py), or build a
  spec through vLLM's factory by that name (its default), they get
  SharedSegOffloadingSpec.
At the end it stops the keeper and writes to $SSEG_OWN_REPORT what it made:
managers, how many attached to their tier, the specs the factory gave, the
tiers left after the keeper."""
import itertools
import json
import os
import signal

from conftest import start_keeper

_made = []
_keeper = {}
_specs = []  # each time vLLM's factory gave our spec for its default name


def _kept(vllms):
    """A stand-in for vLLM's class, with its arguments."""
    names = itertools.count()

    def make(num_chunks, cache_policy="lru", **kwargs):
        import sharedseg
        from sharedseg.engines.vllm.rows import region_blocks
        from sharedseg.vllm_keep import (KeptOffloadingManager, claim_tier, index_bytes,
                                         segment_name)
        row = 4096
        name = f"{segment_name(_keeper['name'])}-{next(names)}"
        tier = sharedseg.create_shared_segment(
            name, world_size=1, blocks=region_blocks(num_chunks, row, index_bytes(num_chunks)),
            layout="grouped", pages="base", keeper=_keeper["name"])
        # as the workers' owner claims it for its engine: the manager writes
        # through the index of a tier its own workers map, or of none
        claim_tier(tier.buffer(), num_chunks, row, name)
        tier.close()  # the workers' group ends; the keeper holds the tier
        manager = KeptOffloadingManager.adopt(
            vllms(num_chunks=num_chunks, cache_policy=cache_policy, **kwargs),
            keeper=_keeper["name"], name=name, row_stride=row, desc=lambda: {"model": "m"},
            engine_id=name)
        _made.append(manager)
        return manager
    return make


def pytest_configure(config):
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    from sharedseg.vllm import SharedSegOffloadingSpec
    OffloadingSpecFactory._registry["CPUOffloadingSpec"] = \
        lambda: _specs.append(1) or SharedSegOffloadingSpec
    _keeper["name"] = f"own-{os.getpid()}"
    _keeper["proc"] = start_keeper(_keeper["name"])


def pytest_collection_modifyitems(items):
    from sharedseg.vllm import SharedSegOffloadingSpec
    for module in {item.module for item in items}:
        if getattr(module, "CPUOffloadingManager", None) is not None:
            module.CPUOffloadingManager = _kept(module.CPUOffloadingManager)
        if getattr(module, "CPUOffloadingSpec", None) is not None:
            module.CPUOffloadingSpec = SharedSegOffloadingSpec


def pytest_unconfigure(config):
    import sharedseg
    from sharedseg.vllm_keep import segment_name
    attached = sum(m._attach_state == "attached" for m in _made)
    for m in _made:
        m.close()
    p = _keeper["proc"]
    p.send_signal(signal.SIGTERM)
    _, said = p.communicate(timeout=30)
    left = [s["name"] for s in sharedseg.list_segments()
            if s["name"].startswith(segment_name(_keeper["name"]))]
    with open(os.environ["SSEG_OWN_REPORT"], "w") as f:
        json.dump({"made": len(_made), "attached": attached, "specs": len(_specs),
                   "tiers_left": left,
                   "keeper_rc": p.returncode, "keeper_said": said[-2000:]}, f)
