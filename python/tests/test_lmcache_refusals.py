# SPDX-License-Identifier: Apache-2.0
"""What LMCache's shared tier cannot serve stops the start with one
sentence (the setting, the value given, what is accepted), never a run
without the CPU tier, on both routes docs/integrations.md gives:

- under vLLM: the connector, built as vLLM builds it (its KVConnectorFactory
  from a --kv-transfer-config line parsed by vLLM's own parser, over an
  LMCache configuration file loaded by LMCache's own loader), refuses at
  its construction, before LMCache builds anything; workers of a real TP
  group refuse so too (test_lmcache.py, the ranks' vllm scenario);
- LMCache's own plugin configuration (outside vLLM): LMCache's engine,
  built by LMCacheEngineBuilder from the YAML, stops with the plugin's
  SystemExit, not LMCache's "Failed to create backend" log."""
import json
import os

import pytest

from conftest import doc_block
from test_lmcache import DOC, LINE, PLUGIN_BLOCK, metadata

pytestmark = pytest.mark.engine

# What the size sentence says is accepted, after "is VALUE: ".
SIZE = ("expected the shared tier's size in GB (2**30 bytes, as LMCache counts them), a finite "
        "number or its text, from 1e-09 (a byte) to under 17179869184 (2**64 bytes, the C "
        "library's sizes)")
OVERRIDE = "kv_connector_extra_config's lmcache."
DISK = ("LMCache builds its disk tier (LocalDiskBackend) over its own CPU tier, before it loads "
        "the storage plugin that is the shared tier; leave local_disk unset")

# ---- under vLLM: the connector ----


def parsed_line(extra):
    """The documented `vllm serve` line with kv_connector_extra_config
    extra in its --kv-transfer-config, through vLLM 0.32's own parser
    (the connector's one release)."""
    import shlex

    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    words = shlex.split(doc_block(DOC, nth=LINE).replace("\\\n", " "))
    at = words.index("--kv-transfer-config") + 1
    words[at] = json.dumps(dict(json.loads(words[at]), kv_connector_extra_config=extra))
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(["--model"] + words[2:])
    return EngineArgs.from_cli_args(args).kv_transfer_config


@pytest.fixture(scope="module")
def vllm_config(tmp_path_factory):
    """vLLM's configuration of the tiny MLA model (its config.json is all
    vLLM's ModelConfig reads) with the documented line, as vLLM makes it
    for a connector; each test gives it its own parsed line."""
    import vllm_engine
    from vllm.config import ModelConfig, VllmConfig
    model = tmp_path_factory.mktemp("model")
    vllm_engine.model_config("deepseek").save_pretrained(model)
    return VllmConfig(model_config=ModelConfig(model=str(model), skip_tokenizer_init=True,
                                               dtype="bfloat16", max_model_len=512),
                      kv_transfer_config=parsed_line({}))


LMCACHE_FILE = "chunk_size: 16\nmax_local_cpu_size: 0.00390625\n"


def connector_refusal(vllm_config, tmp_path, monkeypatch, extra, lmcache_file=LMCACHE_FILE):
    """The ValueError vLLM's factory gets building the connector (the
    scheduler's: its construction is every role's) from the line with
    extra, over lmcache_file loaded as LMCache loads it
    (LMCACHE_CONFIG_FILE, its loader, once per test)."""
    import lmcache.integration.vllm.utils as lmcache_vllm_utils
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    path = tmp_path / "lmcache.yaml"
    path.write_text(lmcache_file)
    monkeypatch.setenv("LMCACHE_CONFIG_FILE", str(path))
    monkeypatch.setattr(lmcache_vllm_utils, "_config_instance", None)
    monkeypatch.setattr(vllm_config, "kv_transfer_config", parsed_line(extra))
    with pytest.raises(ValueError) as e:
        KVConnectorFactory.create_connector(vllm_config, KVConnectorRole.SCHEDULER, None)
    return str(e.value)


@pytest.mark.parametrize("value, shown", [
    ("inf", "'inf'"), (1e300, "1e+300"), (float("nan"), "nan"), ("abc", "'abc'"),
    ([1], "[1]"), (True, "True"), (1e-12, "1e-12"), (0, "0"), (-1, "-1"), (None, "None"),
])
def test_a_size_the_line_gives_that_is_not_one_fails_the_connector(
        vllm_config, tmp_path, monkeypatch, value, shown):
    said = connector_refusal(vllm_config, tmp_path, monkeypatch,
                             {"lmcache.max_local_cpu_size": value})
    assert said == f"{OVERRIDE}max_local_cpu_size is {shown}: {SIZE}"


@pytest.mark.parametrize("text, shown", [
    (".inf", "inf"), ("'inf'", "inf"), ("1.0e+300", "1e+300"), (".nan", "nan"),
    # LMCache's loader reads no number from it (it logs a warning):
    ("abc", "None"),
    ("1.0e-12", "1e-12"), ("0", "0.0"),
])
def test_a_size_lmcaches_file_gives_that_is_not_one_fails_the_connector(
        vllm_config, tmp_path, monkeypatch, text, shown):
    said = connector_refusal(vllm_config, tmp_path, monkeypatch, {},
                             f"chunk_size: 16\nmax_local_cpu_size: {text}\n")
    assert said == f"LMCache's max_local_cpu_size is {shown}: {SIZE}"


@pytest.mark.parametrize("extra, said", [
    # A string: LMCache reads it as a list of names; either way not ours.
    ({"lmcache.storage_plugins": "Mine"},
     f"{OVERRIDE}storage_plugins is 'Mine': expected none (the shared tier is LMCache's storage "
     f"plugin LocalCPUBackend, and LMCache hands other plugins its CPU tier before ours is "
     f"made)"),
    ({"lmcache.storage_plugins": "LocalCPUBackend"},
     f"{OVERRIDE}storage_plugins is 'LocalCPUBackend': expected none"),
    ({"lmcache.extra_config": "{bad"},
     f"{OVERRIDE}extra_config is '{{bad' (Expecting property name enclosed in double quotes: "
     f"line 1 column 2 (char 1)): expected an object of LMCache's extra settings, or its JSON "
     f"text"),
    ({"lmcache.extra_config": "[1]"}, f"{OVERRIDE}extra_config is '[1]': expected an object"),
    ({"lmcache.extra_config": [1]}, f"{OVERRIDE}extra_config is [1]: expected an object"),
    ({"lmcache.extra_config": 5}, f"{OVERRIDE}extra_config is 5: expected an object"),
    # LMCache would build its disk tier over a CPU tier it no longer has.
    ({"lmcache.local_disk": "/nonexistent/lmcache-disk", "lmcache.max_local_disk_size": 1},
     f"LMCache's local_disk is '/nonexistent/lmcache-disk': {DISK}"),
    ({"lmcache.local_disk": "file:///nonexistent/d"}, f"LMCache's local_disk is '/nonexistent/d'"),
    ({"lmcache.enable_p2p": True}, "LMCache's enable_p2p is True: LMCache builds its P2P tier"),
], ids=["plugins-text", "plugins-the-tier", "extra-not-json", "extra-json-list", "extra-list",
        "extra-number", "disk", "disk-url", "p2p"])
def test_what_else_the_line_gives_that_the_tier_cannot_serve_fails_the_connector(
        vllm_config, tmp_path, monkeypatch, extra, said):
    assert connector_refusal(vllm_config, tmp_path, monkeypatch, extra).startswith(said)


@pytest.mark.parametrize("text, said", [
    ("local_disk: /nonexistent/lmcache-disk\nmax_local_disk_size: 1\n",
     f"LMCache's local_disk is '/nonexistent/lmcache-disk': {DISK}"),
    ("storage_plugins: Mine\n", "LMCache's storage_plugins is ['Mine']: expected none"),
    # The user's own plugin configuration, under the connector: judged here too.
    (doc_block(DOC, nth=PLUGIN_BLOCK).replace("max_local_cpu_size: 5 ", "max_local_cpu_size: .inf"),
     f"LMCache's extra_config's sharedseg.max_local_cpu_size is inf: {SIZE}"),
], ids=["disk", "plugins-text", "the-plugin-configuration"])
def test_what_lmcaches_file_gives_that_the_tier_cannot_serve_fails_the_connector(
        vllm_config, tmp_path, monkeypatch, text, said):
    got = connector_refusal(vllm_config, tmp_path, monkeypatch, {}, "chunk_size: 16\n" + text)
    assert got.startswith(said)


def test_a_size_lmcaches_environment_gives_that_is_not_one_fails_the_connector(
        vllm_config, tmp_path, monkeypatch):
    monkeypatch.setenv("LMCACHE_MAX_LOCAL_CPU_SIZE", "inf")  # over its file, as LMCache reads it
    said = connector_refusal(vllm_config, tmp_path, monkeypatch, {})
    assert said == f"LMCache's max_local_cpu_size is inf: {SIZE}"


def test_a_file_lmcache_cannot_load_fails_the_connector(vllm_config, tmp_path, monkeypatch):
    # LMCache's loader raises on a size it cannot convert (not ValueError).
    said = connector_refusal(vllm_config, tmp_path, monkeypatch, {},
                             "chunk_size: 16\nmax_local_cpu_size: [1]\n")
    assert said == (f"LMCache's configuration file {tmp_path / 'lmcache.yaml'} "
                    f"(LMCACHE_CONFIG_FILE) does not load: TypeError: float() argument must be "
                    f"a string or a real number, not 'list'")


def test_a_size_as_text_is_read_as_lmcache_reads_it():
    from sharedseg import lmcache, lmcache_vllm
    from test_lmcache import lmcache_config
    keys = lmcache_vllm.rewrite({"lmcache.max_local_cpu_size": "0.5"}, lmcache_config())
    assert keys["lmcache.extra_config"]["sharedseg.max_local_cpu_size"] == 0.5
    assert lmcache.tier_bytes("0.5", "x") == 1 << 29 and lmcache.tier_bytes(2, "x") == 2 << 30


# ---- LMCache's plugin configuration, outside vLLM ----

def build(tmp_path, text):
    """LMCache's engine, built by LMCacheEngineBuilder from the YAML text,
    as LMCache loads its file: what stopped it (type, message), or what it
    built (its backends' names and classes, then it is destroyed)."""
    from lmcache.v1.cache_engine import LMCacheEngineBuilder
    from lmcache.v1.config import LMCacheEngineConfig
    from lmcache.v1.gpu_connector.mock_gpu_connector import MockGPUConnector

    import lmcache_ranks
    path = tmp_path / "lmcache.yaml"
    path.write_text(text)
    config = LMCacheEngineConfig.from_file(str(path))
    # A model name of this process's own: copies of the test may run at once.
    md = metadata(model=f"refused{os.getpid()}")
    try:
        built = LMCacheEngineBuilder.get_or_create("refused", config, md,
                                                   MockGPUConnector(md.kv_shape),
                                                   lambda t, s: t, lambda o, s: o)
        built.post_init()
    except BaseException as e:
        lmcache_ranks._stop_storage_loop()
        LMCacheEngineBuilder.destroy("refused")
        return type(e).__name__, str(e)
    backends = {k: type(v).__name__ for k, v in built.storage_manager.storage_backends.items()}
    LMCacheEngineBuilder.destroy("refused")
    return "built", backends


def plugin_file(size, rest=""):
    """The documented plugin configuration with sharedseg.max_local_cpu_size
    given as YAML text size, base pages, chunks of 16 tokens."""
    text = doc_block(DOC, nth=PLUGIN_BLOCK)
    assert "sharedseg.max_local_cpu_size: 5 " in text and "{pages: auto}" in text
    text = text.replace("sharedseg.max_local_cpu_size: 5 ", f"sharedseg.max_local_cpu_size: {size} ")
    return "chunk_size: 16\n" + text.replace("{pages: auto}", "{pages: base}") + "\n" + rest


PLUGIN = "sharedseg.lmcache (LocalCPUBackend storage plugin): "


@pytest.mark.parametrize("size, shown", [
    (".inf", "inf"), ("inf", "'inf'"), ("1.0e+300", "1e+300"), ("1e300", "'1e300'"),
    (".nan", "nan"), ("abc", "'abc'"), ("[1]", "[1]"), ("true", "True"), ("1.0e-12", "1e-12"),
    ("0", "0"), ("-1", "-1"),
])
def test_a_size_the_plugin_configuration_gives_that_is_not_one_stops_lmcache(tmp_path, size,
                                                                            shown):
    assert build(tmp_path, plugin_file(size)) == (
        "SystemExit", f"{PLUGIN}extra_config's sharedseg.max_local_cpu_size is {shown}: {SIZE}")


def test_a_tier_too_small_for_one_chunk_stops_lmcache(tmp_path):
    # A chunk: 16 tokens of 2 layers of a 576-wide bf16 latent, 36864 bytes.
    assert build(tmp_path, plugin_file("0.00003")) == (
        "SystemExit", f"{PLUGIN}extra_config's sharedseg.max_local_cpu_size is 3e-05 (32212 "
        f"bytes): less than one LMCache chunk of this model (36864 bytes with its alignment), "
        f"so the tier would hold nothing; give at least 3.5e-05")
    assert build(tmp_path, plugin_file("0.000035")) == ("built",
                                                        {"LocalCPUBackend": "SharedSegCPUBackend"})


def test_any_other_error_of_the_tier_stops_lmcache(tmp_path, monkeypatch):
    # LMCache's plugin loader logs an Exception and goes on without the tier.
    from sharedseg.engines.lmcache import tier

    def plan(config, metadata):
        raise OverflowError("a stand-in for an error the tier did not foresee")
    monkeypatch.setattr(tier, "plan", plan)
    assert build(tmp_path, plugin_file("0.002")) == (
        "SystemExit", f"{PLUGIN}OverflowError: a stand-in for an error the tier did not foresee")


def test_storage_plugins_as_text_is_read_as_lmcache_reads_it(tmp_path):
    text = plugin_file("0.002").replace("storage_plugins: [LocalCPUBackend]",
                                        "storage_plugins: LocalCPUBackend")
    assert build(tmp_path, text) == ("built", {"LocalCPUBackend": "SharedSegCPUBackend"})
    text = plugin_file("0.002").replace("storage_plugins: [LocalCPUBackend]",
                                        "storage_plugins: LocalCPUBackend,Mine")
    kind, said = build(tmp_path, text)
    assert (kind, said.split(": name")[0]) == (
        "SystemExit", f"{PLUGIN}storage_plugins is ['LocalCPUBackend', 'Mine']")


def test_local_disk_beside_the_plugin_stops_lmcache(tmp_path):
    # No disk size: LMCache builds no disk tier, and the plugin refuses it.
    kind, said = build(tmp_path, plugin_file("0.002", "local_disk: /nonexistent/d\n"))
    assert (kind, said) == ("SystemExit", f"{PLUGIN}local_disk is '/nonexistent/d': {DISK}")
    # With one, LMCache 0.5.6 builds it before it loads the plugin, over the
    # CPU tier it has not built, and stops at its own assertion: the start
    # stops, in LMCache's words (under vLLM the connector refuses first).
    kind, _ = build(tmp_path, plugin_file("0.002", "local_disk: /nonexistent/d\n"
                                                   "max_local_disk_size: 1\n"))
    assert kind == "AssertionError"
