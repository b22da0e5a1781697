# SPDX-License-Identifier: Apache-2.0
"""vLLM's host KV tier in one sharedseg segment per TP group: the module
vLLM's configuration names (spec_module_path: sharedseg.vllm, spec_name:
SharedSegOffloadingSpec). The adapter is sharedseg.engines.vllm.spec;
this module is its documented name."""
from .engines.vllm import ENGINE
from .engines.vllm.spec import (WHERE, SharedSegOffloadingSpec, SharedSegRegion, check_version,
                                parse_options)

__all__ = ["SharedSegOffloadingSpec", "SharedSegRegion", "ENGINE", "WHERE", "check_version",
           "parse_options"]
