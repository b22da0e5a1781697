# SPDX-License-Identifier: Apache-2.0
"""Backends and torch devices are named in python/sharedseg/_backends.py
only, so that a backend added in C needs no Python change: anywhere else a
backend or device name as a string value, or a torch device module looked
up (torch.cuda, torch.npu), fails here with its file and line. Docstrings
and messages may name them: a string is flagged only when its whole value is
the name."""
import ast
import io
import pathlib
import tokenize

import sharedseg

PACKAGE = pathlib.Path(sharedseg.__file__).parent
ONE_MODULE = "_backends.py"
EXEMPT = {ONE_MODULE}
# The torch device types that stand for a backend's devices.
TORCH_DEVICES = {"cuda", "npu", "xpu"}


def backend_names():
    """Every backend the C library has (its probe lists them), and the torch
    devices that go with them."""
    return set(sharedseg.probe()["backends"]) | TORCH_DEVICES


def offences(path, names):
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    found = []
    for i, tok in enumerate(tokens):
        where = f"{path.name}:{tok.start[0]}"
        if tok.type == tokenize.STRING:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, str) and value.lower() in names:
                found.append(f"{where}: the string {tok.string} names a backend")
        elif (tok.type == tokenize.NAME and tok.string == "torch" and i + 2 < len(tokens)
              and tokens[i + 1].string == "." and tokens[i + 2].string in TORCH_DEVICES):
            found.append(f"{where}: torch.{tokens[i + 2].string} looks up a device module")
    return found


def test_backends_are_named_in_one_module():
    names = backend_names()
    assert {"memfd", "cuda", "ascend"} <= names
    found = [o for path in sorted(PACKAGE.glob("*.py")) if path.name not in EXEMPT
             for o in offences(path, names)]
    assert not found, (f"backends are named in {ONE_MODULE} only; route these through it:\n"
                       + "\n".join(found))


def test_the_check_catches_a_named_backend(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('"""Names cuda in prose."""\nB = "cuda"\nd = torch.npu.current_device()\n'
                      'm = f"backend {B}"\n')
    assert offences(sample, backend_names()) == [
        "sample.py:2: the string \"cuda\" names a backend",
        "sample.py:3: torch.npu looks up a device module"]


# The engines the adapters serve: each adapter reaches its engine through
# its Engine (sharedseg/_engine.py), never by an import of its own.
ENGINES = {"vllm", "sglang", "lmcache"}


def engine_imports(path):
    """Where a module imports an engine itself: import statements, and
    __import__ / importlib.import_module of an engine's dotted name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", "")) in
              ("__import__", "import_module")):
            names = [node.args[0].value]
        found += [f"{path.name}:{node.lineno}: imports {n}" for n in names
                  if n.split(".")[0] in ENGINES]
    return found


# Every adapter is on the seam.
ON_THE_SEAM = {"sglang.py", "vllm.py", "vllm_cpu.py", "lmcache.py", "lmcache_vllm.py"}


def adapter_modules():
    return [p for p in sorted(PACKAGE.glob("*.py"))
            if p.stem.split("_")[0] in ENGINES and p.name in ON_THE_SEAM]


def test_adapters_reach_their_engines_only_through_the_seam():
    modules = adapter_modules()
    assert {p.name for p in modules} >= ON_THE_SEAM
    found = [o for path in modules for o in engine_imports(path)]
    assert not found, ("an adapter takes its engine's names from its Engine "
                       "(sharedseg/_engine.py), not by importing:\n" + "\n".join(found))


def test_the_seam_check_catches_an_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import vllm\nfrom sglang.srt import x\nimport importlib\n"
                      "m = importlib.import_module('lmcache.v1.config')\nimport torch\n")
    assert engine_imports(sample) == ["sample.py:1: imports vllm",
                                      "sample.py:2: imports sglang.srt",
                                      "sample.py:4: imports lmcache.v1.config"]
