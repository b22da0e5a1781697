# SPDX-License-Identifier: Apache-2.0
"""What sharedseg._native is made of, and an in-place build that needs only
the interpreter's headers and a C compiler (no setuptools: fresh 3.12+
virtual environments have none).

    python3 python/build_native.py       # python/sharedseg/_native<EXT_SUFFIX>

setup.py takes SOURCES, INCLUDE_DIRS, CFLAGS, LDFLAGS and LIBRARIES from
here, so the wheel and the in-place build compile the same thing.
"""
import argparse
import concurrent.futures
import glob
import os
import shlex
import subprocess
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_DIRS = ("python/_native", "src", "src/os", "src/backend", "src/backend/cuda", "src/backend/ascend", "src/driver", "tools")
INCLUDE_DIRS = ["include", "src", "python/_native", "tools"]
# The command line is the C tool's (tools/), without its main().
EXCLUDED = ("tools/main.c",)
# Only PyInit__native leaves the object: the library's symbols stay private,
# so another copy of libsharedseg in the process cannot clash.
CFLAGS = ["-std=gnu11", "-fvisibility=hidden", "-DSSEG_API=", "-Wall", "-Wextra",
          "-Wno-unused-parameter", "-Wno-missing-field-initializers",
          "-Wno-cast-function-type", "-Wno-format-truncation"]
LDFLAGS = ["-Wl,--exclude-libs,ALL"]
LIBRARIES = ["dl", "pthread"]
# One abi3 extension for CPython 3.11 and later (the buffer protocol joined
# the limited API in 3.11); an older interpreter builds the same source on
# its full API.
LIMITED_API = 0x030B0000
if sys.version_info >= (3, 11):
    CFLAGS.append(f"-DPy_LIMITED_API={LIMITED_API:#010x}")


def ext_suffix():
    """.abi3.so on the limited API, else the interpreter's own suffix."""
    if sys.version_info >= (3, 11):
        return ".abi3.so"
    return sysconfig.get_config_var("EXT_SUFFIX")


def sources():
    """The C files, relative to the checkout (setuptools refuses absolute
    paths in a wheel build)."""
    found = []
    for folder in SOURCE_DIRS:
        found += sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, folder, "*.c")))
    return [f for f in found if f not in EXCLUDED]


def _headers_mtime():
    headers = glob.glob(os.path.join(ROOT, "include", "*.h"))
    for folder in SOURCE_DIRS:
        headers += glob.glob(os.path.join(ROOT, folder, "*.h"))
    return max(os.path.getmtime(h) for h in headers)


def _compile(cc, source, obj, include):
    # The project's folders first, so a project header wins over a same-named system one.
    argv = cc + ["-c", os.path.join(ROOT, source), "-o", obj, "-O2", "-g", "-fPIC"] + [
        f"-I{os.path.join(ROOT, d)}" for d in INCLUDE_DIRS] + [f"-I{include}"] + CFLAGS
    done = subprocess.run(argv, capture_output=True, text=True)
    return source, done.returncode, done.stderr


def build(output, build_dir, jobs):
    """Compiles what changed into build_dir and links output."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    ldshared = shlex.split(sysconfig.get_config_var("LDSHARED") or "cc -shared")
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        sys.exit(f"{include}/Python.h is missing: install the interpreter's headers "
                 f"(Debian: apt install python3-dev)")
    os.makedirs(build_dir, exist_ok=True)
    newest_header = _headers_mtime()
    objects, todo = [], []
    for source in sources():
        obj = os.path.join(build_dir, source.replace("/", "_")[:-2] + ".o")
        objects.append(obj)
        if not os.path.exists(obj) or os.path.getmtime(obj) < max(
                os.path.getmtime(os.path.join(ROOT, source)), newest_header):
            todo.append((source, obj))
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda so: _compile(cc, so[0], so[1], include), todo))
    failed = False
    for source, rc, err in results:
        if err:
            sys.stderr.write(err)
        failed |= rc != 0
    if failed:
        sys.exit("sharedseg._native: compilation failed")
    if todo or not os.path.exists(output) or os.path.getmtime(output) < max(
            os.path.getmtime(o) for o in objects):
        argv = ldshared + objects + ["-o", output] + LDFLAGS + [f"-l{lib}" for lib in LIBRARIES]
        if subprocess.run(argv).returncode:
            sys.exit("sharedseg._native: linking failed")
    return output


def main():
    tag = ext_suffix()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", default=os.path.join(ROOT, "python", "sharedseg", "_native" + tag),
                    help="the extension to write (default: in place, under python/sharedseg/)")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build-python", "native" + tag[:-3]),
                    help="where the objects go (one folder per interpreter)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    build(a.output, a.build_dir, a.jobs)


if __name__ == "__main__":
    main()
