# SPDX-License-Identifier: Apache-2.0
"""The adapters' base (sharedseg/engines/base.py): an Engine, one per
engine, refuses a release an adapter was not checked against and a name
its engine lacks, each with one sentence; a SegmentRequest is parsed once
from the user's settings, with help from the C library's name tables, and
carried to the segment's create, which falls back from VMM host memory
to registration where pin auto chose it; a pool is one copy or one slot
per rank; segment names come from what the ranks agree on. And each
adapter's version table in docs/integrations.md is its Engine's."""
import dataclasses
import importlib
import os
import re
import subprocess
import sys
import types

import pytest

from conftest import ROOT, env_with_package

from sharedseg import _native
from sharedseg.engines import base
from sharedseg.engines.base import SegmentRequest

FAKE = "sharedseg.fake"


def fake_engine(monkeypatch, version="1.2.3", **names):
    """An engine package 'fakeengine' with modules and attributes as given,
    served by two adapters: sharedseg.fake on 1.2, sharedseg.other on 1.2
    and 1.3."""
    pkg = types.ModuleType("fakeengine")
    pkg.__path__ = []
    monkeypatch.setitem(sys.modules, "fakeengine", pkg)
    for module, attrs in names.items():
        mod = types.ModuleType(f"fakeengine.{module}")
        for attr in attrs:
            setattr(mod, attr, object())
        monkeypatch.setitem(sys.modules, f"fakeengine.{module}", mod)
    engine = base.Engine("Fake", ("fakeengine",),
                         {"1.2": {FAKE: "tested by nothing", "sharedseg.other": "nor this"},
                          "1.3": {"sharedseg.other": "nor this"}},
                         {FAKE: {"fakeengine.core": ("Region", "Worker"),
                                 "fakeengine.missing": ("Thing",)},
                          "sharedseg.other": {"fakeengine.core": ("Region",)}})
    monkeypatch.setattr(engine, "version", lambda: version)
    return engine


def test_a_release_not_checked_against_is_one_sentence(monkeypatch):
    engine = fake_engine(monkeypatch, version="1.3.0", core=("Region", "Worker"))
    with pytest.raises(RuntimeError) as e:
        engine.check(FAKE)
    assert str(e.value) == ("sharedseg.fake supports Fake 1.2; this is Fake 1.3.0, whose names "
                            "it uses (Region, Worker, Thing) it has not been checked against")
    engine.check("sharedseg.other")  # the same engine's other adapter serves 1.3


def test_a_missing_name_or_module_is_named_with_the_version(monkeypatch):
    engine = fake_engine(monkeypatch, core=("Region",))
    with pytest.raises(RuntimeError) as e:
        engine.check(FAKE)
    text = str(e.value)
    assert text.startswith("sharedseg.fake needs names that Fake 1.2.3 does not have: "
                           "fakeengine.core.Worker, fakeengine.missing (ModuleNotFoundError")
    assert engine.get("fakeengine.core.Region") is sys.modules["fakeengine.core"].Region
    assert engine.get("fakeengine.core.Worker", "fallback") == "fallback"
    with pytest.raises(KeyError, match="not among the names Fake's adapters declare"):
        engine.get("fakeengine.core.Undeclared")
    engine.check("sharedseg.other")  # which takes no missing name


def test_names_are_looked_up_once_and_only_for_the_adapter_that_asks(monkeypatch):
    engine = fake_engine(monkeypatch, core=("Region", "Worker"), missing=("Thing",))
    engine.check("sharedseg.other")
    assert engine.missing("sharedseg.other") == []
    assert set(engine._missing) == {"sharedseg.other"}  # the other adapter's: not yet
    first = engine.get("fakeengine.core.Region")
    monkeypatch.setattr(sys.modules["fakeengine.core"], "Region", "replaced later")
    engine.check(FAKE)
    assert engine.get("fakeengine.core.Region") is first


def test_a_release_table_names_only_adapters_that_declare_names():
    with pytest.raises(ValueError, match="Fake's release table names adapters that declare no "
                                         "names: sharedseg.typo"):
        base.Engine("Fake", ("f",), {"1.0": {"sharedseg.typo": "x"}}, {FAKE: {}})


def test_release_parts():
    engine = base.Engine("X", ("x",), {"0.5.23": {"a": ""}}, {"a": {}}, release_parts=3)
    engine.version = lambda: "0.5.23+local"
    assert engine.release() == "0.5.23"
    engine.release_parts = 2
    assert engine.release() == "0.5"


def test_choices_are_the_c_librarys_words():
    for kind in ("pages", "populate", "numa", "backend"):
        words = base.choices(kind)
        assert words and all(_native.name(kind, i) == w for i, w in enumerate(words))
    assert base.choices("pages") == ["auto", "base", "thp", "hugetlb-2M", "hugetlb-1G"]
    for word in base.choices("pages") + base.choices("populate"):
        assert word in base.settings_help()


def test_settings_are_checked_with_the_list_of_known_ones():
    assert SegmentRequest.parse(None, "X").pin == "auto"
    assert SegmentRequest.parse({"pages": "thp"}, "X").pages == "thp"
    with pytest.raises(ValueError) as e:
        SegmentRequest.parse({"paegs": "thp", "colour": 1}, "the engine's config")
    assert str(e.value).startswith("unknown sharedseg settings 'colour', 'paegs' in the "
                                   "engine's config; known: pages: the page kind: auto, base")
    with pytest.raises(ValueError, match="populate_threads=-1 in X: expected an integer >= 0"):
        SegmentRequest.parse({"populate_threads": -1}, "X")
    with pytest.raises(ValueError, match="pin='always' in X: expected one of auto, vmm"):
        SegmentRequest.parse({"pin": "always"}, "X")
    with pytest.raises(ValueError, match="X must be an object of settings"):
        SegmentRequest.parse("thp", "X")
    for decided in ("platform", "backend", "fallback"):  # on()'s, not the user's
        with pytest.raises(ValueError, match=f"unknown sharedseg setting '{decided}' in X"):
            SegmentRequest.parse({decided: None}, "X")


def test_a_request_is_one_frozen_object_from_the_settings_to_the_create():
    request = SegmentRequest.parse({"pages": "base", "populate_threads": 2}, "X")
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.pages = "thp"
    assert request.settings() == dict(pages="base", numa=None, populate=None,
                                      populate_threads=2, pin="auto", timeout=None, keep=None,
                                      pool=None)
    assert list(request.settings()) == list(base.SETTINGS)
    with pytest.raises(ValueError, match=r"decided for the engine's platform \(on\(\)\)"):
        base.create("py-engine-undecided", request, size=4096)
    on_cpu = request.on("cpu")
    assert (on_cpu.pin, on_cpu.platform, on_cpu.backend, on_cpu.fallback) == \
        ("none", "cpu", None, False)
    assert on_cpu.settings() == dict(request.settings(), pin="none")
    with base.create("py-engine-request", on_cpu, size=4096) as seg:
        assert seg.info["pages"] == "base" and not seg.info["pinned"]
        assert seg.info["settings"]["pages"] == {"value": "base", "source": "argument"}


@pytest.mark.parametrize("pin", ["vmm", "host_register"])
def test_pinning_off_cuda_is_refused_with_a_sentence(pin):
    with pytest.raises(ValueError) as e:
        SegmentRequest.parse({"pin": pin}, "X").on("cpu")
    assert str(e.value) == (f"sharedseg setting pin={pin!r} needs CUDA; the engine runs on its "
                            f"cpu platform here (use pin: none)")


@pytest.mark.parametrize("given", [{"keep": "k"}, {"pool": "p"}])
def test_a_host_pool_makes_pin_auto_registration_on_cuda(caplog, given):
    request = SegmentRequest.parse(given, "X", keeps=True)
    with caplog.at_level("INFO", logger="sharedseg"):
        on_cuda = request.on(base.PINNING_PLATFORM)
    assert (on_cuda.pin, on_cuda.backend, on_cuda.fallback) == ("host_register", None, False)
    assert "pin auto is host_register: a host pool is a memfd" in caplog.text


@pytest.mark.parametrize("replicated", [True, False])
@pytest.mark.parametrize("form", ["shape", "nbytes"])
def test_a_pool_is_one_copy_or_one_slot_per_rank(replicated, form):
    from thread_ranks import run_ranks
    name = f"py-engine-pool-{form}-{int(replicated)}-{os.getpid()}"
    request = SegmentRequest(pages="base").on("cpu")
    size = dict(shape=(4, 1024), dtype="uint8") if form == "shape" else dict(nbytes=4096)

    def make(rank, gather):
        return base.pool(name, request, replicated=replicated, world_size=2, rank_id=rank,
                         exchange=gather, **size)
    made = run_ranks(2, make)
    assert all(isinstance(m, tuple) for m in made), made
    (seg0, mine0), (seg1, mine1) = made
    assert mine0.numel() == mine1.numel() == 4096
    if replicated and form == "nbytes":  # the arena is the segment, declared by its size
        assert seg0.info["size"] == 4096
    else:
        assert len(seg0.offsets("pool")) == (1 if replicated else 2)
    mine0.fill_(7)
    assert int(mine1.sum()) == (7 * 4096 if replicated else 0)
    assert base.slot_of(replicated, 1) == (0 if replicated else 1)
    assert base.sharing(replicated) == ("one copy" if replicated else "a slot per rank")
    for seg in (seg0, seg1):
        seg.close()


def test_segment_names_are_agreed_never_counted():
    a = base.segment_name("sglang", "MLATokenToKVPoolHost", "kv", 0, 0)
    assert a == "sglang-MLATokenToKVPoolHost-kv-0-0"
    assert base.segment_name("sglang", "MLATokenToKVPoolHost", "kv", 0, 0) == a
    long = base.segment_name("vllm", "x" * 80)
    assert len(long.encode()) <= 63 and long.startswith("vllm-")
    assert long == base.segment_name("vllm", "x" * 80)
    assert long != base.segment_name("vllm", "y" * 80)


def test_group_size():
    assert base.group_size(None) == 1 and base.group_size(None, 3) == 3
    assert base.group_size(types.SimpleNamespace(world_size=4)) == 4
    assert base.group_size(types.SimpleNamespace(world_size=None, size=lambda: 5)) == 5


# ---- docs/integrations.md, "Adding an engine adapter" ----

def test_the_documented_minimal_adapter_serves_its_engine(monkeypatch):
    """The section's adapter, run as written against a stand-in engine:
    it refuses another release and an unknown setting with the base's
    sentences, and its pool is one segment named from its role."""
    from conftest import doc_block
    module = types.ModuleType("myengine.cache")

    class HostPool:
        made = True
    module.HostPool = HostPool
    monkeypatch.setitem(sys.modules, "myengine", types.ModuleType("myengine"))
    monkeypatch.setitem(sys.modules, "myengine.cache", module)
    adapter = {}
    exec(compile(doc_block("python/tests/test_engine.py"), "docs/integrations.md", "exec"),
         adapter)
    pool_class, engine = adapter["SharedSegHostPool"], adapter["ENGINE"]
    assert issubclass(pool_class, HostPool)
    with pytest.raises(RuntimeError, match="sharedseg.myengine supports MyEngine 2.1; this is "
                                           "MyEngine not installed"):
        pool_class(None, "kv", (4, 64), "uint8", True)
    monkeypatch.setattr(engine, "version", lambda: "2.1.4")
    with pytest.raises(ValueError, match="unknown sharedseg setting 'paegs' in MyEngine's "
                                         "sharedseg settings; known: pages"):
        pool_class(None, "kv", (4, 64), "uint8", True, paegs="base")
    made = pool_class(None, "kv", (4, 64), "uint8", True, pages="base")
    try:
        assert made.segment.name == "myengine-kv" and tuple(made.tensor.shape) == (4, 64)
        assert made.segment.info["pages"] == "base"
    finally:
        made.segment.close()


# ---- the release tables and the docs' version tables ----

def test_the_docs_version_tables_are_the_release_tables():
    """docs/integrations.md's tables are made by version_tables.py from
    the engines' release tables, and are what it makes, byte for byte."""
    import version_tables
    text = open(version_tables.DOC, encoding="utf-8").read()
    made, absent = version_tables.rewrite(text)
    assert absent == [], f"release tables without a table in the docs: {absent}"
    assert made == text
    run = subprocess.run([sys.executable, version_tables.__file__], capture_output=True,
                         text=True, timeout=120)
    assert (run.returncode, run.stderr) == (0, "")


def test_a_table_that_differs_from_its_release_table_is_named():
    import version_tables
    text = open(version_tables.DOC, encoding="utf-8").read()
    row = "| 0.5.23 | python/tests/test_sglang.py on the engines leg"
    assert row in text
    edited = text.replace(row, "| 0.5.22 | python/tests/test_sglang.py on the engines leg")
    made, _ = version_tables.rewrite(edited)
    assert made == text  # the table is made again from the release table
    dropped = re.sub(r"<!-- versions: SGLang sharedseg.sglang -->.*?<!-- end versions -->", "",
                     text, flags=re.S)
    assert version_tables.rewrite(dropped)[1] == [("SGLang", "sharedseg.sglang")]


def test_every_release_names_the_tests_and_the_leg_that_run_it():
    import version_tables
    make = open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read()
    make_test = " ".join(re.findall(r"^test:(.*)$", make, re.M))  # and its variables' lines
    for engine in version_tables.engines().values():
        for release, row in engine.releases.items():
            for adapter, how in row.items():
                where = f"{engine.title} {release}, {adapter}"
                assert re.search(r"python/tests/\w+\.py", how), f"{where}: names no test"
                for test in re.findall(r"\b(test_\w+\.py)", how):
                    assert os.path.exists(os.path.join(ROOT, "python", "tests", test)), \
                        (where, test)
                # a CI leg behind every release: a target that make test runs
                leg = re.search(r"\(make (test-python-[\w-]+)\)", how)
                assert leg and leg.group(1) in re.findall(r"[\w-]+", make_test), \
                    f"{where}: '{how}' names no leg of make test ({make_test.strip()})"


def test_one_engine_object_for_each_engine_every_adapter_uses():
    """The documented modules' ENGINE is their engine's one object."""
    import version_tables
    found = version_tables.engines()
    assert sorted(found) == ["LMCache", "SGLang", "vLLM"]
    code = ("import sys, sharedseg; sys.exit(any(m.split('.')[0] in ('vllm', 'sglang', "
            "'lmcache') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], env=env_with_package()).returncode == 0
    for module, title in (("sharedseg.vllm", "vLLM"),
                          ("sharedseg.lmcache_vllm", "vLLM"), ("sharedseg.sglang", "SGLang"),
                          ("sharedseg.lmcache", "LMCache")):
        assert importlib.import_module(module).ENGINE is found[title], module
    from sharedseg.lmcache_vllm import LMCACHE
    assert LMCACHE is found["LMCache"]
