# SPDX-License-Identifier: Apache-2.0
"""LMCache under vLLM with its CPU tier in one sharedseg segment: the
module vLLM's configuration names (kv_connector_module_path:
sharedseg.lmcache_vllm, kv_connector: SharedSegLMCacheConnector). The
adapter is sharedseg.engines.lmcache.connector; this module is its
documented name."""
from .engines.lmcache.connector import (ENGINE, LMCACHE, PREFIX, WHERE, SharedSegLMCacheConnector,
                                        as_lmcache_builds, check_version, names_the_plugin,
                                        rewrite, switch_on)

__all__ = ["SharedSegLMCacheConnector", "ENGINE", "LMCACHE", "PREFIX", "WHERE",
           "as_lmcache_builds", "check_version", "names_the_plugin", "rewrite", "switch_on"]
