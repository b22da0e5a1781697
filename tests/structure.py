#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The shape of src/, checked: the core never names a backend or a driver,
the include graph has no cycle, OS primitives and drivers include no core
header beyond the base, each device backend keeps to its folder
(backend/NAME/: it includes no other backend's files nor another driver,
and the shared helpers in backend/ include and name no backend; no two
files of a backend call each other), no file
is over 700 lines, no .c file declares another file's function, and
the version script lists every public function by name, each once, and no
file name is taken twice by the core and src/os/ nor shadows a Python header;
and each C folder of the project keeps to its purpose (ROLES): what it is
for, and whose headers it may include (the library none of the tools', the
benchmarks none of anyone's but the library's and the helpers', and nobody
the benchmarks').

Usage: structure.py SOURCE_DIR (exit 0 pass, 1 fail)."""
import os
import re
import subprocess
import sys

BASE = {"internal.h", "error.h", "log.h", "util.h", "fault.h", "hidden.h"}
# Any case: CUDA_LIBRARY or ASCEND_FABRIC in a core file is a backend's
# name as much as cuda.h is.
BACKEND_WORDS = re.compile(r"SSEG_BACKEND_(CUDA|MEMFD|ASCEND)|cuda|acl|ascend|npu|driver/", re.I)
# Each device backend's folder under backend/, and the drivers (driver/NAME*)
# it may include.
BACKEND_DRIVERS = {"cuda": ("cuda",), "ascend": ("acl",)}
# What every backend may share: the contract and the skeletons (backend/*.c, *.h).
SHARED_BACKEND = {"backend/backend.h", "backend/backend.c", "backend/vmm.h", "backend/vmm.c",
                  "backend/devreg.h", "backend/devreg.c", "backend/probecache.h",
                  "backend/probecache.c"}
# What a shared helper must not name (memfd is what AUTO resolves to).
DEVICE_WORDS = re.compile(r"SSEG_BACKEND_(CUDA|ASCEND)|cuda|acl|ascend", re.I)
MAX_LINES = 700


# Each C folder of the project: what it is for, and the folders whose
# headers it may include (its own always). A file belongs to the longest
# folder its path starts with. docs/architecture.md's block "Who uses whom"
# says the same, and is checked against it (picture()).
ROLES = {
    "src": ("the library: segments, their names, the keeper's client side, the probe's "
            "facts, as structs", ("include",)),
    "tools/lib": ("the tools' helper library: the /proc scan, the one JSON writer, the "
                  "keeper's server, documents built from the library's structs",
                  ("include", "src")),
    "tools": ("the C tool, sharedseg", ("include", "src", "tools/lib")),
    "bench": ("sharedseg-bench, the benchmarks: a program nothing links",
              ("include", "src", "tools/lib")),
    # The extension runs the tool's commands in-process (`sharedseg` from
    # pip is the same tool): it includes the tool's entry (cli_main.h).
    "python/_native": ("the Python extension, sharedseg._native",
                       ("include", "src", "tools/lib", "tools")),
}
# What the library's own files never do: write JSON (the helpers do, from
# its structs).
LIBRARY_NEVER = re.compile(r"json", re.I)


def sources(src):
    for root, _, files in os.walk(src):
        for name in files:
            if name.endswith((".c", ".h")):
                path = os.path.join(root, name)
                yield os.path.relpath(path, src), open(path, encoding="utf-8").read()


def includes(text):
    return re.findall(r'^#include "([^"]+)"', text, re.M)


def unit(path):
    return os.path.splitext(path)[0]


def core_names_no_backend(files):
    bad = []
    for path, text in files.items():
        if path.startswith(("backend/", "driver/")):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if BACKEND_WORDS.search(line):
                bad.append(f"{path}:{n}: names a backend or driver: {line.strip()}")
    return bad


def layers(files):
    bad = []
    for path, text in files.items():
        if not path.startswith(("os/", "driver/")):
            continue
        own = path.split("/")[0] + "/"
        for inc in includes(text):
            if inc not in BASE and not inc.startswith(own) and inc != "sharedseg.h":
                bad.append(f"{path}: includes the core header {inc}")
    return bad


def backend_of(path):
    """NAME for backend/NAME/..., else None."""
    parts = path.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "backend" else None


def backend_folders(files):
    """A device backend includes its own folder, the shared helpers and its
    own driver; nothing else of backend/ or driver/. The core includes the
    contract only, never a backend's folder."""
    bad = []
    for path, text in files.items():
        name = backend_of(path)
        for inc in includes(text):
            if not inc.startswith(("backend/", "driver/")):
                continue
            if name is None and path.startswith(("backend/", "driver/")):
                continue
            if name is None:
                if inc != "backend/backend.h":
                    bad.append(f"{path}: the core includes {inc} (only backend/backend.h)")
                continue
            own = inc.startswith(f"backend/{name}/") or inc in SHARED_BACKEND or any(
                inc.startswith(f"driver/{d}") for d in BACKEND_DRIVERS.get(name, ()))
            if not own:
                bad.append(f"{path}: the {name} backend includes {inc}, not its own")
    for name in sorted({backend_of(p) for p in files} - {None}):
        if name not in BACKEND_DRIVERS:
            bad.append(f"backend/{name}/: a backend folder structure.py does not know "
                       "(add it to BACKEND_DRIVERS with its drivers)")
    return bad


def shared_backend(files):
    """The shared helpers in backend/ serve every backend: they include no
    backend's folder or driver, and name none (memfd.c is a backend; table.h
    is the one list of them)."""
    bad = []
    for path, text in files.items():
        if not path.startswith("backend/") or backend_of(path):
            continue
        for inc in includes(text):
            if backend_of(inc) or inc.startswith("driver/"):
                bad.append(f"{path}: a shared backend file includes {inc}")
        if path not in SHARED_BACKEND:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if DEVICE_WORDS.search(line):
                bad.append(f"{path}:{n}: a shared backend file names a backend: {line.strip()}")
    return bad


def calls_one_way(files):
    """Within a backend folder, one file depends on another, not both ways:
    no two files call each other's functions (cuda_probe.c calls the
    device checks of cuda_device.c, never the reverse)."""
    defined, bad = {}, []
    definition = re.compile(r"^(?!static\b)[A-Za-z_][\w \*]*?\b(sseg_\w+)\s*\([^;{}]*\)\s*\{",
                            re.M)
    for path, text in files.items():
        if path.endswith(".c"):
            for m in definition.finditer(text):
                defined[m.group(1)] = path
    calls = {}
    for path, text in files.items():
        if backend_of(path) and path.endswith(".c"):
            for name in set(re.findall(r"\b(sseg_\w+)\s*\(", text)):
                target = defined.get(name)
                if target and target != path and backend_of(target) == backend_of(path):
                    calls.setdefault(path, set()).add(target)
    for a in sorted(calls):
        for b in sorted(calls[a]):
            if a < b and a in calls.get(b, ()):
                bad.append(f"{a} and {b} call each other (one depends on the other, "
                           "not both ways)")
    return bad


def sizes(files):
    return [f"{p}: {t.count(chr(10))} lines (at most {MAX_LINES})"
            for p, t in sorted(files.items()) if t.count("\n") > MAX_LINES]


def graph(files):
    edges = {}
    for path, text in files.items():
        here = os.path.dirname(path)
        for inc in includes(text):
            target = inc if inc in files else os.path.normpath(os.path.join(here, inc))
            if target in files and unit(target) != unit(path):
                edges.setdefault(unit(path), set()).add(unit(target))
    return edges


def cycles(edges):
    state, found = {}, []

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                found.append(" -> ".join(trail[trail.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return [f"include cycle: {c}" for c in found]


def foreign_prototypes(files):
    bad = []
    decl = re.compile(r"^(?!static\b)(?!typedef\b)[A-Za-z_][\w \*]*?\b(\w+)\s*\([^;{}]*\)\s*;",
                      re.M)
    for path, text in files.items():
        if path.endswith(".c"):
            for m in decl.finditer(text):
                bad.append(f"{path}: declares {m.group(1)}(), which belongs in a header")
    return bad


def version_script(src, header):
    api = re.findall(r"SSEG_API\s+[^;(]*?\b(sseg_\w+)\s*\(", header, re.S)
    text = open(os.path.join(src, "libsharedseg.map"), encoding="utf-8").read()
    listed = re.findall(r"^\s*(sseg_\w+);", text, re.M)
    bad = [f"libsharedseg.map: {s} is listed {listed.count(s)} times"
           for s in sorted(set(listed)) if listed.count(s) > 1]
    bad += [f"libsharedseg.map: {s} is exported by the header but not listed"
            for s in sorted(set(api) - set(listed))]
    bad += [f"libsharedseg.map: {s} is listed but not in the header"
            for s in sorted(set(listed) - set(api))]
    if re.search(r"sseg_\*|\bglobal:\s*\*", text):
        bad.append("libsharedseg.map: a glob; list every symbol by name")
    return bad

# Files that carry a licence line: source, build and packaging files.
LICENSED_SUFFIXES = (".c", ".h", ".py", ".sh", ".mk", ".cmake", ".in", ".map", ".toml", ".cfg")
LICENSED_NAMES = ("CMakeLists.txt", "Makefile", "run")
SKIPPED_DIRS = (".git", "__pycache__", "dist", ".pytest_cache", "corpus")


# Python's own headers that the extension's build sees beside src/ (the
# extension compiles every src/ file with both on the include path).
PYTHON_HEADERS = {"Python.h", "object.h", "objimpl.h", "abstract.h", "pyport.h", "pymem.h",
                  "pystate.h", "import.h", "structmember.h", "warnings.h", "traceback.h"}


def file_names(files):
    """A core file and an OS primitive never share a name (one host.c per
    layer), and no src/ header is named like one of Python's."""
    core = {p for p in files if "/" not in p}
    bad = [f"{p} and os/{p}: one name in two layers" for p in sorted(core)
           if f"os/{p}" in files]
    bad += [f"{p}: named like Python's {os.path.basename(p)}" for p in sorted(files)
            if os.path.basename(p) in PYTHON_HEADERS]
    return bad


def folder_of(path):
    """The ROLES folder a project path belongs to (the longest that fits)."""
    fits = [f for f in ROLES if path.startswith(f + "/")]
    return max(fits, key=len) if fits else None


def c_files(root):
    found = {}
    for folder in ROLES:
        for top, dirs, names in os.walk(os.path.join(root, folder)):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            for name in names:
                if name.endswith((".c", ".h")):
                    path = os.path.relpath(os.path.join(top, name), root)
                    if folder_of(path) == folder:
                        found[path] = open(os.path.join(root, path), encoding="utf-8").read()
    return found


def resolve(root, path, inc, search):
    """Where #include "inc" of path lands: beside it, then on the folders
    its build searches (its own, and those ROLES lets it use)."""
    for top in [os.path.dirname(path)] + list(search):
        target = os.path.normpath(os.path.join(top, inc))
        if os.path.isfile(os.path.join(root, target)):
            return target
    return None


def folder_roles(root):
    """Every C folder includes only what ROLES lets it; the library writes
    no JSON."""
    bad = []
    for path, text in sorted(c_files(root).items()):
        own = folder_of(path)
        allowed = (own,) + ROLES[own][1]
        search = [own] + [f for f in ROLES if f != own] + ["include"]
        for inc in includes(text):
            target = resolve(root, path, inc, search)
            if target is None:
                continue  # a generated or a system header
            there = folder_of(target) or target.split("/")[0]
            if there not in allowed:
                bad.append(f"{path}: includes {target}: {own}/ ({ROLES[own][0]}) may include "
                           f"{', '.join(f + '/' for f in allowed)} only")
        if own == "src":
            for n, line in enumerate(text.splitlines(), 1):
                if LIBRARY_NEVER.search(line):
                    bad.append(f"{path}:{n}: the library speaks of JSON (the tools' helper "
                               f"library writes it, from structs): {line.strip()}")
    return bad


PICTURE = "docs/architecture.md"


def picture(root):
    """docs/architecture.md's block of who uses whom: one line per ROLES
    folder, "FOLDER/  words  uses A/ B/ ...", naming what ROLES allows."""
    path = os.path.join(root, PICTURE)
    text = open(path, encoding="utf-8").read() if os.path.isfile(path) else ""
    m = re.search(r"<!-- check: by tests/structure.py -->\s*```text\n(.*?)```", text, re.S)
    if not m:
        return [f"{PICTURE}: no block of who uses whom (marked check: by tests/structure.py)"]
    drawn = {}
    for line in m.group(1).splitlines():
        parts = re.match(r"(\S+)/\s.*\buses\s+(.*)$", line)
        if not parts:
            return [f"{PICTURE}: '{line}' is not 'FOLDER/  what  uses A/ B/'"]
        drawn[parts.group(1)] = {u.rstrip("/") for u in parts.group(2).split()}
    bad = [f"{PICTURE}: {f}/ is not drawn" for f in ROLES if f not in drawn]
    bad += [f"{PICTURE}: {f}/ is drawn but structure.py's ROLES has no such folder"
            for f in drawn if f not in ROLES]
    bad += [f"{PICTURE}: {f}/ is drawn using {', '.join(sorted(drawn[f]))}; ROLES lets it use "
            f"{', '.join(sorted(ROLES[f][1]))}"
            for f in ROLES if f in drawn and drawn[f] != set(ROLES[f][1])]
    return bad


HOST = re.compile(r"[a-z][a-z0-9+.-]*://([A-Za-z0-9.-]+)")


def package_hosts():
    """The hosts this machine takes packages from, as it is configured:
    apt's sources (their comments too) and pip's indexes (configured, and
    pip's default with the host it serves files from); (hosts, whence)."""
    hosts, whence = set(), []
    parts = "/etc/apt/sources.list.d"
    apt = ["/etc/apt/sources.list"] + [
        os.path.join(parts, n) for n in (sorted(os.listdir(parts)) if os.path.isdir(parts) else [])
        if n.endswith((".list", ".sources"))]  # what apt reads
    for path in apt:
        if os.path.isfile(path):
            hosts |= set(HOST.findall(open(path, encoding="utf-8", errors="replace").read()))
            whence.append(path)
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        hosts |= set(HOST.findall(os.environ.get(var, "")))
    ask = ("import json; from pip._internal.models.index import PyPI; "
           "from pip._internal.configuration import Configuration as C; c = C(isolated=False); "
           "c.load(); print(json.dumps([PyPI.simple_url, 'https://' + PyPI.file_storage_domain] "
           "+ [str(v) for k, v in c.items() if k.endswith('index-url')]))")
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            out = subprocess.run([python, "-c", ask], capture_output=True, text=True, timeout=60)
        except OSError:
            continue
        if out.returncode == 0:
            hosts |= set(HOST.findall(out.stdout))
            whence.append(f"{python}'s pip")
            break
    return {h.lower() for h in hosts}, whence


def no_package_host(root):
    """No file of the tree names a host this machine takes packages from:
    make deps and the tests use the machine's configured sources."""
    hosts, whence = package_hosts()
    if not hosts:
        return ["structure.py: no package host found to check against (read: "
                f"{', '.join(whence) or 'nothing'})"]
    bad = []
    for top, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("build")
                         and not d.endswith(".egg-info"))
        for name in sorted(names):
            path = os.path.join(top, name)
            try:
                text = open(path, encoding="utf-8").read().lower()
            except (UnicodeDecodeError, OSError):
                continue  # not text
            for host in sorted(hosts):
                if host in text:
                    bad.append(f"{os.path.relpath(path, root)}: names the package host {host} "
                               f"(take it from the machine's configuration: {', '.join(whence)})")
    return bad


def project_files(root):
    """The licence, changelog and SPDX line every file carries, and what
    .gitignore keeps out of a commit."""
    problems = [f"{name} is missing" for name in ("LICENSE", "CHANGELOG.md")
                if not os.path.isfile(os.path.join(root, name))]
    for top, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("build")
                         and not d.endswith(".egg-info"))
        for name in sorted(names):
            if not (name.endswith(LICENSED_SUFFIXES) or name in LICENSED_NAMES):
                continue
            path = os.path.join(top, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                head = [f.readline() for _ in range(5)]
            if not any("SPDX-License-Identifier: Apache-2.0" in line for line in head):
                problems.append(f"{os.path.relpath(path, root)}: no SPDX-License-Identifier "
                                "line in its first 5 lines")
    ignore = os.path.join(root, ".gitignore")
    patterns = open(ignore).read().split() if os.path.isfile(ignore) else []
    problems += [f".gitignore does not keep {p} out" for p in ("a.out", "/build/", "/build-*/",
                                                                "*.so", "*.o") if p not in patterns]
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(__file__))
    src = os.path.join(root, "src")
    files = dict(sources(src))
    header = open(os.path.join(root, "include", "sharedseg.h"), encoding="utf-8").read()
    problems = (core_names_no_backend(files) + layers(files) + backend_folders(files) +
                shared_backend(files) + calls_one_way(files) + sizes(files) + cycles(graph(files)) +
                foreign_prototypes(files) + version_script(src, header) + file_names(files) +
                project_files(root) + folder_roles(root) + picture(root) +
                no_package_host(root))
    for p in problems:
        print(p)
    print(f"structure: {len(files)} files, {'ok' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
