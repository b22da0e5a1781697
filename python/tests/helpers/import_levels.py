# SPDX-License-Identifier: Apache-2.0
"""The import levels of a Python package's modules: a module that imports
no module of the package is level 0, any other one level above the
highest it imports. Every import counts, a deferred one (inside a
function) too; the C extension (_native) is a module of level 0; a circle
of modules, which has no level, is reported.

    python import_levels.py [PACKAGE_DIR]   (default: python/sharedseg)

prints the count of modules and of levels, the circles, then each module
with its level and what it imports. python/tests/test_structure.py holds
the package to its rules with it."""
import ast
import os
import pathlib
import sys

NATIVE = "_native"


def modules(package):
    """{dotted name below the package ("engines.base", "engines.vllm.__init__"): path}."""
    package = pathlib.Path(package)
    found = {".".join(p.relative_to(package).with_suffix("").parts): p
             for p in sorted(package.rglob("*.py"))}
    found[NATIVE] = None
    return found


def _named(parent, names, known):
    """`from PARENT import NAMES`: each name that is a module, and PARENT
    itself (its __init__ for a package) for a name that is not."""
    targets = []
    for name in names:
        target = ".".join(parent + [name])
        targets.append(target if target in known or f"{target}.__init__" in known
                       else ".".join(parent))
    return targets


def imports(name, path, known, top="sharedseg"):
    """The package's modules that module name imports."""
    if path is None:
        return set()
    here = name.split(".")[:-1]  # the package the module is in
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parent = here[:len(here) - node.level + 1]
                parent += node.module.split(".") if node.module else []
            elif node.module and node.module.split(".")[0] == top:
                parent = node.module.split(".")[1:]
            else:
                continue
            targets = _named(parent, [a.name for a in node.names], known)
        elif isinstance(node, ast.Import):
            targets = [".".join(a.name.split(".")[1:]) for a in node.names
                       if a.name.split(".")[0] == top]
        for target in targets:
            for candidate in (target, f"{target}.__init__" if target else "__init__"):
                if candidate in known and candidate != name:
                    found.add(candidate)
    return found


def graph(package):
    known = modules(package)
    return {name: imports(name, path, known) for name, path in known.items()}


def _components(g):
    """Strongly connected modules (Tarjan), each before those that import it."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = set()
            while True:
                w = stack.pop()
                on.discard(w)
                part.add(w)
                if w == v:
                    break
            out.append(part)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def levels(g):
    """({module: level}, [circle, ...]); a circle's modules share a level."""
    parts = _components(g)
    part_of = {v: k for k, part in enumerate(parts) for v in part}
    level = {}
    for k, part in enumerate(parts):
        below = {part_of[w] for v in part for w in g[v]} - {k}
        level[k] = 1 + max((level[b] for b in below), default=-1)
    return {v: level[part_of[v]] for v in g}, [sorted(p) for p in parts if len(p) > 1]


def counted(g):
    """The modules counted as the package's: not __init__, __main__ or the extension."""
    return [m for m in g if m.split(".")[-1] not in ("__init__", "__main__", NATIVE)]


def main(argv):
    python = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    g = graph(argv[1] if len(argv) > 1 else os.path.join(python, "sharedseg"))
    level, circles = levels(g)
    print(f"{len(counted(g))} modules (and {len(g) - len(counted(g))} __init__, __main__ and "
          f"the extension), {max(level.values()) + 1} levels, {len(circles)} circles"
          + "".join(f"\ncircle: {' <-> '.join(c)}" for c in circles))
    for name in sorted(g, key=lambda m: (level[m], m)):
        print(f"{level[name]:3} {name}: {', '.join(sorted(g[name])) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
