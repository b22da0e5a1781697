# SPDX-License-Identifier: Apache-2.0
"""LMCache's CPU tier in one sharedseg segment: the module LMCache's
configuration names (storage_plugin.LocalCPUBackend.module_path:
sharedseg.lmcache, class_name: SharedSegCPUBackend). The adapter is
sharedseg.engines.lmcache.tier; this module is its documented name."""
from .engines.lmcache import ENGINE
from .engines.lmcache.tier import (GB, PLUGIN, SETTINGS_KEY, SIZE_KEY, TIER, UNSERVED,
                                   SharedSegCPUBackend, SharedSegMemoryAllocator, check_version,
                                   config_refusal, plan, refusal, replicated, tier_bytes,
                                   tier_ranks)

__all__ = ["SharedSegCPUBackend", "SharedSegMemoryAllocator", "ENGINE", "GB", "PLUGIN",
           "SETTINGS_KEY", "SIZE_KEY", "TIER", "UNSERVED", "check_version", "config_refusal",
           "plan", "refusal", "replicated", "tier_bytes", "tier_ranks"]
