# SPDX-License-Identifier: Apache-2.0
"""SGLang's HiCache storage tier on the host pool (sharedseg.sglang's
HostPoolStorage), against the real SGLang (0.5.23): built by SGLang's own
storage factory from the documented extra config, over SGLang's own MLA and
MHA host pools on CPU, in separate processes as separate engines (or DP
ranks) are. What one stores the other finds and loads, the bytes right;
MLA ranks share one key per page (the first rank writes), MHA ranks one a
rank; another SGLang configuration on the pool's name is refused with the
field named; a missing pool name says what to add; the line
docs/integrations.md gives parses, with SGLang's own parser, to the
configuration these tests build."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, doc_block, env_with_package

pytestmark = pytest.mark.engine


class Engine:
    def __init__(self, name, kind="mla", tp_rank=0, tp_size=1, extra=None, env=None):
        self.p = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "python", "tests", "helpers",
                                          "sglang_storage_engine.py"),
             name, kind, str(tp_rank), str(tp_size), json.dumps(extra or {})],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=env or env_with_package())
        self.first = self.read()

    def read(self):
        line = self.p.stdout.readline()
        assert line, f"the engine process ended: {self.p.wait(timeout=60)}"
        return json.loads(line)

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.read()

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        assert self.p.wait(timeout=120) == 0
        self.p.stdout.close()


def name_of(request):
    return f"sgl-{os.getpid()}-{abs(hash(request.node.name)) % 10**6}"


def test_one_engine_loads_what_another_stored(request):
    a = Engine(name_of(request))
    assert a.first == {"ready": "HostPoolStorage"}
    b = Engine(name_of(request))
    try:
        assert a.ask("store 0 4") == {"stored": [True] * 4}
        got = b.ask("load 0 6")
        assert got == {"exists": 4, "got": [True] * 4, "same": [True] * 4}
        assert b.ask("store 0 2") == {"stored": [True] * 2}  # stored already: taken as is
        info = b.ask("info")
        assert info["used"] == 4 and info["stores"] == 4 and len(info["attached"]) == 2
    finally:
        a.close()
    try:  # a gone, b still holds the pool: what a stored is still there
        assert b.ask("load 0 4") == {"exists": 4, "got": [True] * 4, "same": [True] * 4}
    finally:
        b.close()


def test_mla_ranks_share_a_page_mha_ranks_keep_their_own(request):
    mla = [Engine(name_of(request) + "-mla", tp_rank=r, tp_size=2) for r in (0, 1)]
    try:
        assert mla[1].ask("store 0 2") == {"stored": [True, True]}  # not the writer
        assert mla[0].ask("load 0 2")["exists"] == 0
        assert mla[0].ask("store 0 2") == {"stored": [True, True]}
        assert mla[1].ask("load 0 2") == {"exists": 2, "got": [True, True],
                                          "same": [True, True]}
    finally:
        for e in mla:
            e.close()
    mha = [Engine(name_of(request) + "-mha", "mha", tp_rank=r, tp_size=2) for r in (0, 1)]
    try:
        assert mha[0].ask("store 0 2") == {"stored": [True, True]}
        assert mha[1].ask("load 0 2")["exists"] == 0  # rank 1's heads are not rank 0's
        assert mha[1].ask("store 0 2") == {"stored": [True, True]}
        for e in mha:
            assert e.ask("load 0 2") == {"exists": 2, "got": [True, True], "same": [True, True]}
    finally:
        for e in mha:
            e.close()


def test_another_configuration_is_refused_by_name(request):
    a = Engine(name_of(request))
    try:
        b = Engine(name_of(request), "mha")
        assert "means something else" in b.first["error"], b.first
        assert "'pool=MHATokenToKVPoolHost'" in b.first["error"], b.first
        b.close()
        c = Engine(name_of(request), extra={"pool": ""})
        assert c.first["error"].startswith("ValueError: sharedseg's SGLang storage backend "
                                           "needs the pool's name"), c.first
        c.close()
    finally:
        a.close()


def test_another_sglang_release_is_refused_with_a_sentence(request, tmp_path):
    info = tmp_path / "release" / "sglang-0.5.9.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.9\n")
    env = env_with_package()
    env["PYTHONPATH"] = os.pathsep.join((str(info.parent), env["PYTHONPATH"]))
    e = Engine(name_of(request), env=env)
    assert e.first["error"].startswith("RuntimeError: sharedseg.sglang (storage) supports "
                                       "SGLang 0.5.23; this is SGLang 0.5.9"), e.first
    e.close()


def test_the_documented_line_is_what_the_tests_build():
    """The documented command, through SGLang's own argument parser: the
    storage backend and its configuration are the ones the tests build."""
    import argparse
    import shlex

    from sglang.srt.server_args import ServerArgs
    line = doc_block("python/tests/test_sglang_storage.py")
    argv = shlex.split(line)
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    args = parser.parse_args(argv[3:])
    assert args.enable_hierarchical_cache and args.hicache_storage_backend == "dynamic"
    assert json.loads(args.hicache_storage_backend_extra_config) == {
        "backend_name": "sharedseg", "module_path": "sharedseg.engines.sglang.storage",
        "class_name": "HostPoolStorage", "interface_v1": 1, "pool": "kv"}
