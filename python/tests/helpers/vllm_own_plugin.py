# SPDX-License-Identifier: Apache-2.0
"""A pytest plugin (-p vllm_own_plugin) under which vLLM's own offloading
tests (tests/v1/kv_offload of vLLM's sdist, unchanged) run on sharedseg's
spec: where they name vLLM's CPUOffloadingSpec (test_factory.py), or build
a spec through vLLM's factory by that name (its default), they get
SharedSegOffloadingSpec. At the end it writes to $SSEG_OWN_REPORT how many
specs the factory gave."""
import json
import os

_specs = []  # each time vLLM's factory gave our spec for its default name


def pytest_configure(config):
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    from sharedseg.vllm import SharedSegOffloadingSpec
    OffloadingSpecFactory._registry["CPUOffloadingSpec"] = \
        lambda: _specs.append(1) or SharedSegOffloadingSpec


def pytest_collection_modifyitems(items):
    from sharedseg.vllm import SharedSegOffloadingSpec
    for module in {item.module for item in items}:
        if getattr(module, "CPUOffloadingSpec", None) is not None:
            module.CPUOffloadingSpec = SharedSegOffloadingSpec


def pytest_unconfigure(config):
    with open(os.environ["SSEG_OWN_REPORT"], "w") as f:
        json.dump({"specs": len(_specs)}, f)
