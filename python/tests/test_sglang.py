# SPDX-License-Identifier: Apache-2.0
"""sharedseg.sglang against the real SGLang (0.5.23, pinned by
tools/install-deps.sh), switched on as docs/integrations.md says: the
environment variable alone, in processes spawned as SGLang's launcher
spawns its schedulers, which find the package's plugin through its entry
point (as pip installs it) and SGLang's load_plugins(). SGLang's own MLA and
MHA host pools are built on CPU over 2 and 4 gloo ranks. SGLang's engine
itself cannot run here (its HiCache copies are CUDA kernels): sglang_ranks.py
moves device<->host through torch stand-ins for them and says so."""
import json
import os
import subprocess
import sys

import pytest

from conftest import (ROOT, TESTS, doc_block, env_with_package, plugin_site, run_rank_script,
                      switched_on)

pytestmark = pytest.mark.engine

LAYOUTS = ("layer_first", "page_first", "page_first_direct")


def run_ranks(tmp_path, scenarios, world, value="1"):
    # Each rank imports torch and SGLang (about 20 s of CPU each): 16 copies
    # of a test on 2 cores need the room.
    return run_rank_script(tmp_path, "sglang_ranks.py", scenarios, world, timeout=900,
                           env=switched_on(tmp_path, value))


def test_the_tested_sglang_is_installed():
    import sharedseg.sglang as adapter
    assert adapter.ENGINE.version() == "0.5.23"
    adapter.check_version()


def test_the_documented_line_is_the_switch_the_tests_set():
    line = doc_block("python/tests/test_sglang.py")
    assert line.startswith("SHAREDSEG_SGLANG=1 python -m sglang.launch_server ")


@pytest.mark.parametrize("world", [2, 4])
def test_mla_host_pool_is_one_copy_for_the_group(tmp_path, world):
    per_rank = run_ranks(tmp_path, ",".join(f"mla-{layout}" for layout in LAYOUTS), world)
    for rank in per_rank:
        assert rank["installed"] is True and rank["switch"] == "1"
    for layout in LAYOUTS:
        seen = [r[f"mla-{layout}"] for r in per_rank]
        for s in seen:
            # SGLang's pool got our allocator; the pool is the segment whole.
            assert s["allocator"] == "SharedSegHostTensorAllocator"
            assert s["at_start"] and s["segment_size"] == s["pool_bytes"]
            # One copy: every rank maps the same file (one memfd, by its
            # inode in /proc/PID/maps), and the listing sees one segment of
            # the group, mapped by every rank.
            assert s["mapping"]["path"].startswith("/memfd:sseg:sglang-MLATokenToKVPoolHost")
            assert s["mapping"]["file"] == seen[0]["mapping"]["file"]
            assert s["segments"] == [dict(name=s["segment"], world_size=world,
                                          processes=world)]
            assert s["indices"] == seen[0]["indices"] and len(s["indices"]) == 32
            assert s["page_from_rank0"] is True
            if layout != "page_first":
                assert s["loaded_rank0_rows"] is True
            assert s["left"] == []


def test_mha_host_pool_is_a_slot_per_rank_of_one_segment(tmp_path):
    per_rank = run_ranks(tmp_path, "mha", 2)
    seen = [r["mha"] for r in per_rank]
    for rank, s in enumerate(seen):
        assert s["allocator"] == "SharedSegHostTensorAllocator"
        assert s["mapping"]["path"].startswith("/memfd:sseg:sglang-MHATokenToKVPoolHost")
        assert s["mapping"]["file"] == seen[0]["mapping"]["file"]  # one segment
        assert s["segment_size"] >= 2 * s["pool_bytes"]
        assert s["slot"] == rank            # each rank's heads in a slot of its own
        assert s["own_page_kept"] is True   # the other rank's write went to its own slot


def test_sglangs_memory_guard_counts_a_shared_pool_once_per_host(tmp_path):
    """No budget scope of the test's own: SGLang's guard as a server meets
    it, on a host whose available memory the ranks read as 16 GiB. A
    one-copy pool of 1.5 times a rank's allowance: refused by SGLang with
    its own allocator, served with ours (lazily: nothing resident); a
    per-rank pool as large: refused with ours too."""
    per_rank = run_ranks(tmp_path, "guard", 2)
    for r in per_rank:
        s = r["guard"]
        # SGLang's allowance: (16 GiB available - its 10 GiB reserve) / 2 ranks
        assert s["ranks_per_host"] == 2 and s["allowance"] == 3 << 30, s
        assert s["own_mla"] is not None and s["own_mla"].startswith(
            "Not enough host memory available. Requesting 4.83 GB but only have 3.22 GB "
            "free"), s
        ours = s["ours_mla"]
        assert ours["allocator"] == "SharedSegHostTensorAllocator"
        assert s["allowance"] < ours["pool_bytes"] <= 2 * s["allowance"], s
        (seg,) = ours["segments"]
        assert seg["processes"] == 2 and seg["size"] >= ours["pool_bytes"], seg
        assert seg["resident"] < 64 << 20, seg  # lazily populated: nothing touched
        assert s["ours_mha"] is not None and "Not enough host memory" in s["ours_mha"], s


def test_storage_backends_are_served_or_refused_naming_the_backend(tmp_path):
    per_rank = run_ranks(tmp_path, "storage", 2)
    for r in per_rank:
        s = r["storage"]
        assert s["file"] == s["mooncake"] == "SharedSegHostTensorAllocator"
        for backend in ("hf3fs", "nixl"):
            assert s[backend].startswith("sharedseg.sglang serves SGLang's host pool with no "
                                         "storage backend or under 'file', 'mooncake'; this "
                                         "server's "
                                         f"storage backend '{backend}' brings its own "
                                         "allocator or is untested here"), s[backend]


def test_a_rank_that_refused_its_settings_pairs_again_at_the_next_pool(tmp_path):
    per_rank = run_ranks(tmp_path, "desync", 2)
    first = [r["desync"]["first"] for r in per_rank]
    assert "did not reach the setup exchange" in first[0], first[0]
    assert first[1].startswith("ValueError: unknown sharedseg setting 'bogus'"), first[1]
    assert [r["desync"]["second"] for r in per_rank] == ["SharedSegHostTensorAllocator"] * 2


def _plugin_in_a_fresh_interpreter(tmp_path, value, code="load_plugins()"):
    env = switched_on(tmp_path, value)
    return subprocess.run(
        [sys.executable, "-c", f"from sglang.srt.plugins import load_plugins\n{code}\n"
         "import sharedseg.sglang as a; print('installed', a.installed())"],
        env=env, cwd=TESTS, capture_output=True, text=True, timeout=120)


def test_a_switch_that_cannot_be_served_stops_sglang_with_a_sentence(tmp_path):
    bad = _plugin_in_a_fresh_interpreter(tmp_path, '{"pages": "thp", "colour": "blue"}')
    assert bad.returncode == 1
    assert "sharedseg.sglang (SHAREDSEG_SGLANG is set): unknown sharedseg setting 'colour' " \
           "in SHAREDSEG_SGLANG; known: pages: the page kind: auto, base, thp" in bad.stderr
    assert "Traceback" not in bad.stderr
    word = _plugin_in_a_fresh_interpreter(tmp_path, "yes")
    assert word.returncode == 1 and "SHAREDSEG_SGLANG='yes': expected 1, 0, or a JSON " \
                                    "object of settings" in word.stderr
    # Another SGLang release: the same stop, naming the one tested.
    other = _plugin_in_a_fresh_interpreter(
        tmp_path, "1", "import sharedseg.sglang as a\n"
        "a.ENGINE.version = lambda: '0.5.9'\nload_plugins()")
    assert other.returncode == 1
    assert "sharedseg.sglang supports SGLang 0.5.23; this is SGLang 0.5.9" in other.stderr


def test_without_the_switch_the_plugin_does_nothing(tmp_path):
    off = _plugin_in_a_fresh_interpreter(tmp_path, "0")
    assert off.returncode == 0, off.stderr
    assert off.stdout.strip() == "installed False"
    on = _plugin_in_a_fresh_interpreter(tmp_path, '{"pages": "base"}')
    assert on.returncode == 0, on.stderr
    assert on.stdout.strip() == "installed True"


def test_install_replaces_sglangs_allocator_choice_and_uninstall_puts_it_back():
    import importlib

    import sharedseg.sglang as adapter
    own = {m: importlib.import_module(m).get_allocator_from_storage for m in adapter.USERS}
    budgets = {m: importlib.import_module(m).host_memory_budget_bytes for m in adapter.USERS}
    from sglang.srt.mem_cache.storage.backend_factory import StorageBackendFactory as factory
    own_mooncake = factory._registry["mooncake"]
    made = []
    adapter.install(lambda **kw: made.append(kw) or "ours")
    try:
        from sglang.srt.mem_cache.pool_host import base, common
        assert base.get_allocator_from_storage("default") == "ours"
        assert all(getattr(importlib.import_module(m).host_memory_budget_bytes, "sharedseg",
                           False) for m in adapter.USERS)
        assert common.get_allocator_from_storage("file") == "ours"
        assert common.get_allocator_from_storage("mooncake") == "ours"
        assert factory._registry["mooncake"]["class_name"] == "SharedMooncakeStore"
        with pytest.raises(RuntimeError, match="storage backend 'shm' brings its own"):
            base.get_allocator_from_storage("shm")
        assert adapter.installed()
    finally:
        adapter.uninstall()
    assert {m: importlib.import_module(m).get_allocator_from_storage
            for m in adapter.USERS} == own
    assert {m: importlib.import_module(m).host_memory_budget_bytes
            for m in adapter.USERS} == budgets
    assert factory._registry["mooncake"] is own_mooncake
    assert not adapter.installed()


def test_the_allocator_refuses_device_memory_and_pinning_of_its_own():
    import sharedseg.sglang as adapter
    with pytest.raises(ValueError, match="allocates host memory; got device='cuda'"):
        adapter.SharedSegHostTensorAllocator(group=object()).allocate((4,), "float32", "cuda")
    with pytest.raises(ValueError, match="SGLang pins the host pool itself"):
        adapter.SharedSegHostTensorAllocator(group=object(), pin="vmm")


def test_the_entry_point_is_what_the_wheel_declares():
    import tomllib
    project = tomllib.loads(open(os.path.join(ROOT, "pyproject.toml")).read())["project"]
    assert project["entry-points"]["sglang.srt.plugins"] == {
        "sharedseg": "sharedseg.sglang:plugin"}


# ---- python -m sharedseg.sglang --check: whether the switch takes effect ----
#
# SGLang 0.5.23's loader (sglang/srt/plugins/__init__.py,
# load_plugins_by_group) finds general plugins by entry point only, and
# when SGLANG_PLUGINS is set and not empty loads only the names in its
# comma-separated list (stripped, empty ones dropped); it passes over any
# other plugin with an info line nobody sees. Each case runs the check as a
# user would, and SGLang's own load_plugins() in the same environment: the
# check's verdict is what SGLang does.

def no_sharedseg_installed():
    """The package under test is the checkout's, importable only: an
    installed one would register the entry point the cases leave out."""
    import importlib.metadata
    try:
        dist = importlib.metadata.distribution("sharedseg")
    except importlib.metadata.PackageNotFoundError:
        return
    pytest.fail(f"a sharedseg is installed in this environment ({dist.locate_file('')}): "
                f"these tests need the checkout's package only")


def release_named(tmp_path, version):
    """A directory that makes importlib.metadata see SGLang as version."""
    info = tmp_path / "release" / f"sglang-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    return str(info.parent)


def foreign_site(tmp_path):
    """Another distribution whose plugin of SGLang's is named sharedseg."""
    info = tmp_path / "foreign" / "other-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: other\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[sglang.srt.plugins]\nsharedseg = other.sglang:hook\n")
    return str(info.parent)


def check_env(tmp_path, entry_point=True, plugins=None, switch="1", release=None):
    """entry_point: True (ours, as pip installs it), False (none: the package
    only importable) or "foreign" (another distribution's of that name)."""
    env = env_with_package()
    for name in ("SGLANG_PLUGINS", "SHAREDSEG_SGLANG", "SGLANG_PLATFORM"):
        env.pop(name, None)
    first = [release_named(tmp_path, release)] if release else []
    first += [foreign_site(tmp_path) if entry_point == "foreign" else plugin_site(tmp_path)] \
        if entry_point else []
    env["PYTHONPATH"] = os.pathsep.join(first + [env["PYTHONPATH"]])
    env.update({k: v for k, v in (("SGLANG_PLUGINS", plugins), ("SHAREDSEG_SGLANG", switch))
                if v is not None})
    return env


def check(env, *args):
    return subprocess.Popen([sys.executable, "-m", "sharedseg.sglang", *args], env=env,
                            cwd=TESTS, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def sglang_loads_it(env):
    """SGLang's load_plugins() in a fresh interpreter: whether our plugin ran
    and installed the allocator."""
    return subprocess.Popen(
        [sys.executable, "-c", "from sglang.srt.plugins import load_plugins\nload_plugins()\n"
         "import sharedseg.sglang as a; print('installed', a.installed())"],
        env=env, cwd=TESTS, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finished(process):
    out, err = process.communicate(timeout=300)
    return process.returncode, out.decode(), err.decode()


NOT_LISTED = ("SGLANG_PLUGINS={} does not list sharedseg, and SGLang loads only the plugins "
              "it lists: add sharedseg to it (comma-separated) or unset it")
NO_ENTRY_POINT = ("no entry point sharedseg in group sglang.srt.plugins: sharedseg is importable "
                  f"here ('{os.path.dirname(TESTS)}') but not installed as a package, and "
                  "SGLang finds its plugins by entry point only: install the sharedseg wheel "
                  "into this environment with pip")
SWITCH_UNSET = ("SHAREDSEG_SGLANG is not set, so the plugin does nothing: set "
                "SHAREDSEG_SGLANG=1 (or a JSON object of settings) in SGLang's environment")

CASES = {
    "plugins-unset": (dict(), []),
    "plugins-empty": (dict(plugins=""), []),
    "plugins-list-ours": (dict(plugins="other, sharedseg"), []),
    "plugins-omit-ours": (dict(plugins="other,sharedseg2"),
                          [NOT_LISTED.format("'other,sharedseg2'")]),
    "plugins-blank": (dict(plugins=" , "), [NOT_LISTED.format("' , '")]),
    "no-entry-point": (dict(entry_point=False), [NO_ENTRY_POINT]),
    "foreign-entry-point": (dict(entry_point="foreign"), [
        "the entry point sharedseg in group sglang.srt.plugins names 'other.sglang:hook', not "
        "sharedseg.sglang:plugin: reinstall sharedseg"]),
    "switch-unset": (dict(switch=None), [SWITCH_UNSET]),
    "switch-json": (dict(switch='{"pages": "base"}'), []),
    # The plugin stops SGLang's start-up with this sentence.
    "switch-malformed": (dict(switch="yes\x1b[2J"), ["SHAREDSEG_SGLANG='yes\\x1b[2J': expected "
                                                      "1, 0, or a JSON object of settings ("]),
    "other-release": (dict(release="0.5.9"), ["sharedseg.sglang supports SGLang 0.5.23; this is "
                                              "SGLang 0.5.9, whose names it uses "]),
}


@pytest.mark.parametrize("case", CASES)
def test_the_check_says_what_sglangs_loader_does(tmp_path, case):
    no_sharedseg_installed()
    given, problems = CASES[case]
    env = check_env(tmp_path, **given)
    ran = [check(env, "--check", "--json"), sglang_loads_it(env)]
    (rc, out, err), (_, loaded, _) = [finished(p) for p in ran]
    doc = json.loads(out)
    assert err == "" and rc == (0 if not problems else 1), err
    # What SGLang did: our plugin installed the allocator, or never ran (or
    # stopped the start-up, for another release).
    assert doc["takes_effect"] is (loaded.strip() == "installed True"), (doc, loaded)
    assert doc["takes_effect"] is (not problems)
    assert len(doc["problems"]) == len(problems)
    for said, expected in zip(doc["problems"], problems):
        assert said.startswith(expected), said
    entry_point = {True: ("sharedseg.sglang:plugin", "sharedseg 0.0.0"), False: (None, None),
                   "foreign": ("other.sglang:hook", "other 1.0")}[given.get("entry_point", True)]
    assert doc["entry_point"] == dict(group="sglang.srt.plugins", name="sharedseg",
                                      registered=entry_point[0] is not None,
                                      value=entry_point[0], distribution=entry_point[1])
    assert doc["sglang_plugins"]["value"] == given.get("plugins")
    assert doc["sglang_plugins"]["loads"] is not case.startswith(("plugins-omit", "plugins-blank"))
    assert doc["switch"]["on"] is (case not in ("switch-unset", "switch-malformed"))
    assert doc["switch"]["understood"] is (case != "switch-malformed")
    assert doc["sglang"] == dict(version=given.get("release", "0.5.23"), supported=["0.5.23"])


def fields(text):
    """The report's lines, "name: value" each, and its last line."""
    lines = text.splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines[:-1])}, lines[-1]


def test_the_checks_text_when_the_switch_takes_effect(tmp_path):
    rc, out, err = finished(check(check_env(tmp_path), "--check"))
    assert (rc, err) == (0, "")
    facts, verdict = fields(out)
    assert facts == {"python": f"'{sys.executable}'",
                     "SGLang": "0.5.23 (sharedseg.sglang supports 0.5.23)",
                     "entry point": "sharedseg = sharedseg.sglang:plugin in group "
                                    "sglang.srt.plugins, of sharedseg 0.0.0",
                     "SGLANG_PLUGINS": "unset: lets it load", "SHAREDSEG_SGLANG": "'1': on"}
    assert verdict == ("the switch takes effect: SGLang's plugin loader runs sharedseg's "
                       "plugin, which puts the HiCache host pools in sharedseg segments")


def test_the_checks_text_says_each_problem_in_a_sentence_escaped(tmp_path):
    """Three problems: three sentences on stderr, the JSON's, and what the
    user set shown escaped (an escape sequence in SGLANG_PLUGINS)."""
    no_sharedseg_installed()
    env = check_env(tmp_path, entry_point=False, plugins="\x1b[2Jother", switch=None)
    text, doc = [check(env, "--check"), check(env, "--check", "--json")]
    (rc, out, err), (json_rc, json_out, _) = finished(text), finished(doc)
    assert rc == json_rc == 1
    assert "\x1b" not in out + err
    facts, verdict = fields(out)
    assert facts["entry point"] == "none in group sglang.srt.plugins"
    assert facts["SGLANG_PLUGINS"] == "'\\x1b[2Jother': does not list sharedseg"
    assert facts["SHAREDSEG_SGLANG"] == "unset: off"
    assert verdict == "the switch does not take effect here: 3 problems (stderr)"
    problems = [NO_ENTRY_POINT, NOT_LISTED.format("'\\x1b[2Jother'"), SWITCH_UNSET]
    assert err.splitlines() == [f"sharedseg.sglang: {p}" for p in problems]
    assert json.loads(json_out)["problems"] == problems


def test_the_checks_help_and_bad_arguments():
    rc, out, err = finished(check(env_with_package(), "--help"))
    assert (rc, err) == (0, "")
    assert out.startswith("usage: python -m sharedseg.sglang --check [--json]\n")
    for said in ("the entry point sharedseg = sharedseg.sglang:plugin in group "
                 "sglang.srt.plugins", "SGLANG_PLUGINS: unset or empty, SGLang loads every",
                 "Exit status: 0 it would take effect, 1 it would not, 2 a bad argument."):
        assert said in " ".join(out.split()), out
    for argv, sentence in ((["--check", "--frob\x1b[2J"],
                            "unknown argument '--frob\\x1b[2J' (see python -m sharedseg.sglang "
                            "--help)"),
                           ([], "say --check (see python -m sharedseg.sglang --help)")):
        rc, out, err = finished(check(env_with_package(), *argv))
        assert (rc, out, err) == (2, "", f"sharedseg.sglang: {sentence}\n")


def test_the_docs_give_the_check_as_it_is_run():
    """docs/integrations.md's check line, where the switch is given: the
    command these tests run (`--check`, the switch set)."""
    assert doc_block("python/tests/test_sglang.py", nth=1) == \
        "SHAREDSEG_SGLANG=1 python -m sharedseg.sglang --check"


def test_an_mla_pool_under_decode_context_parallelism_is_a_slot_a_rank():
    """Under DCP each rank of the attention-TP group holds its own shard of
    an MLA pool's tokens: one copy would mix them."""
    import sharedseg.sglang as adapter
    from sharedseg.engines.sglang import plugin
    from sglang.srt.mem_cache.pool_host.mla import MLATokenToKVPoolHost
    from sglang.srt.runtime_context import get_parallel
    adapter.check_version()
    pool = object.__new__(MLATokenToKVPoolHost)
    assert plugin._replicated(pool)
    with get_parallel().override(attn_dcp_size=2):
        assert not plugin._replicated(pool)
    with get_parallel().override(attn_dcp_size=1):
        assert plugin._replicated(pool)
