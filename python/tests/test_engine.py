# SPDX-License-Identifier: Apache-2.0
"""The adapters' seam (sharedseg/_engine.py): an Engine refuses a release
it was not checked against and a name its engine lacks, each with one
sentence; settings are parsed with help from the C library's name tables;
segment names come from what the ranks agree on. And each adapter's
version table in docs/integrations.md is its Engine's."""
import importlib
import os
import re
import sys
import types

import pytest

from conftest import ROOT

from sharedseg import _engine, _native


def fake_engine(monkeypatch, version="1.2.3", **names):
    """An engine package 'fakeengine' with modules and attributes as given."""
    pkg = types.ModuleType("fakeengine")
    pkg.__path__ = []
    monkeypatch.setitem(sys.modules, "fakeengine", pkg)
    for module, attrs in names.items():
        mod = types.ModuleType(f"fakeengine.{module}")
        for attr in attrs:
            setattr(mod, attr, object())
        monkeypatch.setitem(sys.modules, f"fakeengine.{module}", mod)
    engine = _engine.Engine("Fake", ("fakeengine",), {"1.2": "tested by nothing"},
                            {"fakeengine.core": ("Region", "Worker"),
                             "fakeengine.missing": ("Thing",)}, adapter="sharedseg.fake")
    monkeypatch.setattr(engine, "version", lambda: version)
    return engine


def test_a_release_not_checked_against_is_one_sentence(monkeypatch):
    engine = fake_engine(monkeypatch, version="1.3.0", core=("Region", "Worker"))
    with pytest.raises(RuntimeError) as e:
        engine.check()
    assert str(e.value) == ("sharedseg.fake supports Fake 1.2; this is Fake 1.3.0, whose names "
                            "it uses (Region, Worker, Thing) it has not been checked against")


def test_a_missing_name_or_module_is_named_with_the_version(monkeypatch):
    engine = fake_engine(monkeypatch, core=("Region",))
    with pytest.raises(RuntimeError) as e:
        engine.check()
    text = str(e.value)
    assert text.startswith("sharedseg.fake needs names that Fake 1.2.3 does not have: "
                           "fakeengine.core.Worker, fakeengine.missing (ModuleNotFoundError")
    assert engine.get("fakeengine.core.Region") is sys.modules["fakeengine.core"].Region
    assert engine.get("fakeengine.core.Worker", "fallback") == "fallback"
    with pytest.raises(KeyError, match="not among the names sharedseg.fake declares"):
        engine.get("fakeengine.core.Undeclared")


def test_names_are_looked_up_once(monkeypatch):
    engine = fake_engine(monkeypatch, core=("Region", "Worker"), missing=("Thing",))
    engine.check()
    first = engine.get("fakeengine.core.Region")
    monkeypatch.setattr(sys.modules["fakeengine.core"], "Region", "replaced later")
    assert engine.get("fakeengine.core.Region") is first


def test_release_parts():
    engine = _engine.Engine("X", ("x",), {"0.5.23": ""}, {}, adapter="a", release_parts=3)
    engine.version = lambda: "0.5.23+local"
    assert engine.release() == "0.5.23"
    engine.release_parts = 2
    assert engine.release() == "0.5"


def test_choices_are_the_c_librarys_words():
    for kind in ("pages", "populate", "numa", "backend"):
        words = _engine.choices(kind)
        assert words and all(_native.name(kind, i) == w for i, w in enumerate(words))
    assert _engine.choices("pages") == ["auto", "base", "thp", "hugetlb-2M", "hugetlb-1G"]
    for word in _engine.choices("pages") + _engine.choices("populate"):
        assert word in _engine.settings_help()


def test_settings_are_checked_with_the_list_of_known_ones():
    assert _engine.parse_settings(None, "X")["pin"] == "auto"
    assert _engine.parse_settings({"pages": "thp"}, "X")["pages"] == "thp"
    with pytest.raises(ValueError) as e:
        _engine.parse_settings({"paegs": "thp", "colour": 1}, "the engine's config")
    assert str(e.value).startswith("unknown sharedseg settings 'colour', 'paegs' in the "
                                   "engine's config; known: pages: the page kind: auto, base")
    with pytest.raises(ValueError, match="populate_threads=-1 in X: expected an integer >= 0"):
        _engine.parse_settings({"populate_threads": -1}, "X")
    with pytest.raises(ValueError, match="pin='always' in X: expected one of auto, vmm"):
        _engine.parse_settings({"pin": "always"}, "X")
    with pytest.raises(ValueError, match="X must be an object of settings"):
        _engine.parse_settings("thp", "X")


def test_segment_names_are_agreed_never_counted():
    a = _engine.segment_name("sglang", "MLATokenToKVPoolHost", "kv", 0, 0)
    assert a == "sglang-MLATokenToKVPoolHost-kv-0-0"
    assert _engine.segment_name("sglang", "MLATokenToKVPoolHost", "kv", 0, 0) == a
    long = _engine.segment_name("vllm", "x" * 80)
    assert len(long.encode()) <= 63 and long.startswith("vllm-")
    assert long == _engine.segment_name("vllm", "x" * 80)
    assert long != _engine.segment_name("vllm", "y" * 80)


# every adapter, and vLLM's keep (an Engine of its own: the names it takes)
ADAPTERS = ("sharedseg.sglang", "sharedseg.vllm", "sharedseg.lmcache", "sharedseg.vllm_keep",
            "sharedseg.lmcache_vllm")


def documented_versions(module):
    """The rows of the version table docs/integrations.md marks for module."""
    text = open(os.path.join(ROOT, "docs", "integrations.md"), encoding="utf-8").read()
    marker = f"<!-- versions: {module} -->"
    assert marker in text, f"docs/integrations.md has no version table for {module} ({marker})"
    rows = {}
    for line in text.split(marker, 1)[1].lstrip("\n").splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1]
    return rows


@pytest.mark.engine
@pytest.mark.parametrize("module", ADAPTERS)
def test_each_adapters_version_table_is_its_engines(module):
    adapter = importlib.import_module(module)
    assert documented_versions(module) == adapter.ENGINE.releases
    make = open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read()
    make_test = " ".join(re.findall(r"^test:(.*)$", make, re.M))  # and its variables' lines
    for release, how in adapter.ENGINE.releases.items():
        assert re.search(r"python/tests/\w+\.py", how), \
            f"{module} {release}: '{how}' names no test that runs it"
        tests = re.findall(r"\b(test_\w+\.py)", how)
        for test in tests:
            assert os.path.exists(os.path.join(ROOT, "python", "tests", test)), (module, test)
        # a CI leg behind every release: a target that make test runs
        leg = re.search(r"\(make (test-python-[\w-]+)\)", how)
        assert leg and leg.group(1) in re.findall(r"[\w-]+", make_test), \
            f"{module} {release}: '{how}' names no leg of make test ({make_test.strip()})"
