# SPDX-License-Identifier: Apache-2.0
"""LMCache under vLLM with its CPU tier in one sharedseg segment, switched
on by one line: the connector's name in vLLM's --kv-transfer-config, where
LMCache's own line names LMCacheConnectorV1:

    --kv-transfer-config '{"kv_connector": "SharedSegLMCacheConnector",
        "kv_connector_module_path": "sharedseg.lmcache_vllm", "kv_role": "kv_both"}'

SharedSegLMCacheConnector is vLLM's LMCacheConnectorV1. Before LMCache
builds its engine it rewrites LMCache's configuration (LMCache's file or
environment, and the "lmcache." keys of kv_connector_extra_config, LMCache's
own route for vLLM's overrides) into the storage-plugin configuration that
sharedseg.lmcache serves: max_local_cpu_size, the size LMCache would give
its CPU tier in each rank, becomes the size of the one segment's tier, and
LMCache's own CPU tier is not built. Our settings go under "sharedseg" in
kv_connector_extra_config, as for vLLM's own offloading. The rewrite goes
through LMCache's own override keys: nothing of LMCache or vLLM is replaced.

A configuration the tier cannot serve fails the connector with one
sentence (ValueError), before LMCache builds its engine: the rewrite
judges LMCache's size, storage_plugins and extra_config, then the plugin's
own judgement of a configuration (sharedseg.lmcache.config_refusal) runs on
the configuration LMCache will build from; what depends on the rank (the
scheduler, lookup servers, the model's chunk) is judged where the plugin
builds the tier.

Importing sharedseg never imports this module; this module imports vLLM and
LMCache (through ENGINE and LMCACHE: sharedseg.engines.vllm's and .lmcache's).
"""
import copy
import json
import os
from typing import Any, Dict, Mapping

from . import CONNECTOR
from . import ENGINE as LMCACHE
from . import tier as _plugin
from ..base import SegmentRequest
from ..vllm import ENGINE

_CONNECTOR = "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_connector"
_CONFIG = "lmcache.integration.vllm.utils"
_CONFIG_BASE = "lmcache.v1.config_base"
# The LMCache keys the rewrite sets, as LMCache's vLLM integration reads
# them from kv_connector_extra_config.
PREFIX = "lmcache."
WHERE = 'kv_connector_extra_config["sharedseg"]'


def check_version() -> None:
    """RuntimeError, in a sentence, for a vLLM or LMCache release this
    module was not checked against, or one that lacks a name it uses."""
    ENGINE.check(CONNECTOR)
    _plugin.check_version()
    LMCACHE.check(CONNECTOR)


def _given(extra: Mapping[str, Any], config: Any, key: str) -> Any:
    """LMCache's value of key: the "lmcache." override if there is one, as
    LMCache applies it, else its configuration's."""
    return extra[PREFIX + key] if PREFIX + key in extra else getattr(config, key)


def _setting(extra: Mapping[str, Any], key: str) -> str:
    """Where the user gave key, in a sentence."""
    if PREFIX + key in extra:
        return f"kv_connector_extra_config's {PREFIX}{key}"
    return f"LMCache's {key}"


def _base_extra(extra: Mapping[str, Any], config: Any) -> Dict[str, Any]:
    """LMCache's extra_config: an object, or the JSON text of one (as
    LMCache reads it from kv_connector_extra_config); ValueError, in a
    sentence, for anything else (LMCache would log it and drop it)."""
    given = _given(extra, config, "extra_config")
    base, problem = given, ""
    if isinstance(given, str):
        try:
            base = json.loads(given) if given else None
        except ValueError as e:
            problem = f" ({e})"
    if base is None:
        return {}
    if not isinstance(base, Mapping):
        raise ValueError(f"{_setting(extra, 'extra_config')} is {given!r}{problem}: expected "
                         f"an object of LMCache's extra settings, or its JSON text")
    return dict(base)


def names_the_plugin(extra: Mapping[str, Any], config: Any) -> bool:
    """Whether LMCache's configuration names the plugin already: rewritten
    (vLLM builds the scheduler's and a worker's connector from one
    configuration in one process at TP=1), or written so by the user."""
    lm_extra = _base_extra(extra, config)
    return all(lm_extra.get(k) == v for k, v in _plugin.PLUGIN.items())


def rewrite(extra: Mapping[str, Any], config: Any) -> Dict[str, Any]:
    """The "lmcache." keys that make LMCache's configuration (config, with
    kv_connector_extra_config extra over it) the plugin's: ValueError, in
    a sentence, for one the tier cannot serve."""
    size = _given(extra, config, "max_local_cpu_size")
    _plugin.tier_bytes(size, _setting(extra, "max_local_cpu_size"))
    plugins = _given(extra, config, "storage_plugins")
    if plugins:
        raise ValueError(f"{_setting(extra, 'storage_plugins')} is {plugins!r}: expected none "
                         f"(the shared tier is LMCache's storage plugin {_plugin.TIER}, and "
                         f"LMCache hands other plugins its CPU tier before ours is made)")
    settings = extra.get("sharedseg") or {}
    SegmentRequest.parse(settings, WHERE)  # judged here, named as the user wrote them
    lm_extra = dict(_base_extra(extra, config), **_plugin.PLUGIN,
                    **{_plugin.SIZE_KEY: float(size), _plugin.SETTINGS_KEY: dict(settings)})
    return {PREFIX + "max_local_cpu_size": 0.0, PREFIX + "storage_plugins": [_plugin.TIER],
            PREFIX + "extra_config": lm_extra}


def as_lmcache_builds(extra: Mapping[str, Any], config: Any) -> Any:
    """A copy of config with extra's "lmcache." keys applied as LMCache's
    vLLM integration applies them (its own function): the configuration
    LMCache builds its engine from."""
    applied = copy.deepcopy(config)
    apply = LMCACHE.get(f"{_CONFIG_BASE}.validate_and_set_config_value")
    for key, value in extra.items():
        if key.startswith(PREFIX):
            apply(applied, key[len(PREFIX):], value)
    return applied


def _loaded() -> Any:
    """LMCache's configuration, as its vLLM integration loads it (its file
    in LMCACHE_CONFIG_FILE, else its environment); ValueError, in a
    sentence, where LMCache's loader raises (a value it cannot convert)."""
    try:
        return LMCACHE.get(f"{_CONFIG}.lmcache_get_or_create_config")()
    except Exception as e:
        path = os.environ.get("LMCACHE_CONFIG_FILE")
        source = f"file {path} (LMCACHE_CONFIG_FILE)" if path else "environment (LMCACHE_*)"
        raise ValueError(f"LMCache's configuration {source} does not load: "
                         f"{type(e).__name__}: {e}") from e


def switch_on(kv_transfer_config: Any, config: Any = None) -> None:
    """Rewrites kv_transfer_config's kv_connector_extra_config in place so
    that LMCache's vLLM integration, which applies its "lmcache." keys over
    LMCache's configuration (config; default: the one it loads), builds
    the shared tier. ValueError, in a sentence, for a configuration the
    tier cannot serve: judged here, before LMCache builds anything, since
    LMCache builds some tiers before it loads the plugin, and its vLLM
    integration runs on without an engine when one fails."""
    extra = kv_transfer_config.kv_connector_extra_config
    if config is None:
        config = _loaded()
    keys: Dict[str, Any] = {}
    if names_the_plugin(extra, config):
        written = _base_extra(extra, config).get(_plugin.SETTINGS_KEY)
        if extra.get("sharedseg") not in (None, written):
            raise ValueError(f"LMCache's configuration names the sharedseg plugin itself: its "
                             f"settings are extra_config's {_plugin.SETTINGS_KEY} ({written!r}), "
                             f"not {WHERE} ({extra['sharedseg']!r})")
    else:
        keys = rewrite(extra, config)
    why = _plugin.config_refusal(as_lmcache_builds(dict(extra, **keys), config))
    if why is not None:
        raise ValueError(f"LMCache's {why}")
    extra.update(keys)


_Connector = ENGINE.get(f"{_CONNECTOR}.LMCacheConnectorV1", object)


class SharedSegLMCacheConnector(_Connector):  # type: ignore[misc, valid-type]
    """vLLM's LMCacheConnectorV1 over LMCache's CPU tier in one segment of
    the TP group (see the module's docstring)."""

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None):
        check_version()
        switch_on(vllm_config.kv_transfer_config)
        super().__init__(vllm_config, role, kv_cache_config)
