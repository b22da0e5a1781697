# SPDX-License-Identifier: Apache-2.0
"""The package's layout, held as rules.

Backends and torch devices are named in python/sharedseg/_backends.py
only, so that a backend added in C needs no Python change: anywhere else a
backend or device name as a string value, or a torch device module looked
up (torch.cuda, torch.npu), fails here with its file and line. Docstrings
and messages may name them: a string is flagged only when its whole value is
the name.

The engine adapters are one package, sharedseg/engines/: no module imports
an engine (vLLM, SGLang, LMCache) itself, only through its Engine; no
module outside engines/ imports an adapter but the documented names
(sharedseg.vllm, ...), which only re-export; inside engines/, only the base
(engines/base.py) imports the package's private modules, the adapters
take the public API and the base; no import circle anywhere."""
import ast
import io
import pathlib
import subprocess
import sys
import tokenize

import pytest

import sharedseg
from conftest import env_with_package

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
    found = [o for path in sorted(PACKAGE.rglob("*.py")) if path.name not in EXEMPT
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
# its Engine (sharedseg/engines/base.py), never by an import of its own.
ENGINES = {"vllm", "sglang", "lmcache"}
# The adapters' package: the only one that knows an engine.
ADAPTERS = "engines"
# The adapters' one door into the package: nothing else of engines/
# imports a private module.
BASE = "engines.base"
# The documented module names (users' configurations name them), which
# re-export the adapters and do nothing else.
DOCUMENTED = {"vllm", "sglang", "lmcache", "lmcache_vllm"}


def package_modules():
    return sorted(PACKAGE.rglob("*.py"))


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


def test_no_module_imports_an_engine_itself():
    adapters = [p for p in package_modules() if ADAPTERS in p.relative_to(PACKAGE).parts]
    assert {p.stem for p in adapters} >= {"spec", "pool", "cpu_worker", "plugin", "tier",
                                          "connector"}
    found = [o for path in package_modules() for o in engine_imports(path)]
    assert not found, ("an adapter takes its engine's names from its Engine "
                       "(sharedseg/engines/base.py), not by importing:\n" + "\n".join(found))


def test_the_seam_check_catches_an_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import vllm\nfrom sglang.srt import x\nimport importlib\n"
                      "m = importlib.import_module('lmcache.v1.config')\nimport torch\n")
    assert engine_imports(sample) == ["sample.py:1: imports vllm",
                                      "sample.py:2: imports sglang.srt",
                                      "sample.py:4: imports lmcache.v1.config"]


def import_graph():
    """{module: the package's modules it imports} (helpers/import_levels.py)."""
    import import_levels
    return import_levels.graph(PACKAGE)


def layering_offences(graph):
    """What the layout forbids: a module outside engines/ that imports an
    adapter (the documented names excepted); a module of engines/ other
    than the base that imports a private module of the package."""
    found = []
    for module, imported in sorted(graph.items()):
        inside = module.split(".")[0] == ADAPTERS
        for target in sorted(imported):
            if not inside and target.split(".")[0] == ADAPTERS and module not in DOCUMENTED:
                found.append(f"{module} imports the adapter {target}: only the documented "
                             f"names ({', '.join(sorted(DOCUMENTED))}) re-export adapters")
            if (inside and module != BASE and target.split(".")[0] != ADAPTERS
                    and target != "__init__"):
                found.append(f"{module} imports {target}: the adapters take the package "
                             f"from its public API (sharedseg) and {BASE} only")
    return found


def test_the_adapters_are_a_package_over_one_base():
    graph = import_graph()
    assert not layering_offences(graph), "\n".join(layering_offences(graph))
    # The base imports no adapter; every adapter module is above it.
    assert not [t for t in graph[BASE] if t.split(".")[0] == ADAPTERS]
    for module in graph:
        if module.split(".")[0] == ADAPTERS and module not in (BASE, "engines.__init__"):
            assert BASE in graph[module] or any(
                t.split(".")[0] == ADAPTERS for t in graph[module]), module


def test_the_layering_check_catches_a_private_import_and_a_stray_adapter():
    graph = {"engines.vllm.spec": {"_plan", "engines.base"}, "cli": {"engines.vllm.spec"},
             "vllm": {"engines.vllm.spec"}, "engines.base": {"_plan"}}
    assert layering_offences(graph) == [
        "cli imports the adapter engines.vllm.spec: only the documented names (lmcache, "
        "lmcache_vllm, sglang, vllm) re-export adapters",
        "engines.vllm.spec imports _plan: the adapters take the package from its public API "
        "(sharedseg) and engines.base only"]


def test_no_import_circle():
    import import_levels
    _, circles = import_levels.levels(import_graph())
    assert circles == []
    circle = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert import_levels.levels(circle) == ({"a": 0, "b": 0, "c": 1}, [["a", "b"]])


def test_the_documented_names_only_re_export():
    """sharedseg.vllm, .sglang, ...: what users' configurations name, and
    nothing but imports from the adapters (and sglang's --check)."""
    for name in sorted(DOCUMENTED):
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        body = tree.body[1:] if ast.get_docstring(tree) else tree.body
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["__all__"]:
                continue
            if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'":
                continue
            raise AssertionError(f"{name}.py:{node.lineno} does more than re-export: "
                                 f"{ast.unparse(node)[:80]}")


@pytest.mark.parametrize("module, names", [
    ("sharedseg.vllm", ["SharedSegOffloadingSpec"]),
    ("sharedseg.sglang", ["plugin", "install", "uninstall"]),
    ("sharedseg.lmcache", ["SharedSegCPUBackend", "SharedSegMemoryAllocator"]),
    ("sharedseg.lmcache_vllm", ["SharedSegLMCacheConnector"]),
])
def test_the_documented_names_import_without_their_engine(module, names):
    """Each loads by module path as the engines load it, and names what
    users' configurations name; without the engine (the Debian leg) too."""
    code = (f"import importlib; m = importlib.import_module({module!r}); "
            f"print(sorted(set({names!r}) - set(m.__all__)), all(hasattr(m, n) for n in {names!r}))")
    run = subprocess.run([sys.executable, "-W", "ignore", "-c", code], env=env_with_package(),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n")[-2] == "[] True"


def test_the_tests_folder_holds_tests_and_helpers_hold_the_rest():
    """python/tests: test files and conftest.py; what they run or import
    that is no test (rank scripts, engine launchers, the docs' generators)
    is in python/tests/helpers, where no test file is."""
    tests = pathlib.Path(__file__).parent
    tracked = subprocess.run(["git", "ls-files", "--", "."], cwd=tests, capture_output=True,
                             text=True, check=True).stdout.split()
    stray = [f for f in tracked if "/" not in f and not (f.startswith("test_") and f.endswith(".py"))
             and f != "conftest.py"]
    assert not stray, f"python/tests holds files that are no test (move them to helpers/): {stray}"
    helpers = [f for f in tracked if f.startswith("helpers/")]
    assert helpers and not [f for f in helpers if f.split("/")[-1].startswith("test_")], helpers
    assert {f.split("/")[0] for f in tracked if "/" in f} == {"helpers"}, tracked
