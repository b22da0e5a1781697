# SPDX-License-Identifier: Apache-2.0
"""Fetches part of an engine's own tests from its sdist on PyPI, for
the tests that run an engine's own test files on sharedseg's classes
(python/tests/test_vllm_own.py). tools/install-deps.sh runs it once per
machine and version.

  sdist-tests.py DIST VERSION DEST PATH...
      downloads DIST-VERSION.tar.gz from PyPI's simple index, checks its
      sha256 against the index's, and extracts each PATH (a folder or a
      file) of DIST-VERSION into DEST/DIST-VERSION, replacing what was
      there; nothing is changed in DEST on failure

Only PyPI is reached (its JSON simple index, PEP 691)."""
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import urllib.request

INDEX = "https://pypi.org/simple/"


def sdist(dist, version):
    """The sdist's URL and sha256 from the index."""
    req = urllib.request.Request(INDEX + dist + "/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        files = json.load(r)["files"]
    want = f"{dist}-{version}.tar.gz"
    for f in files:
        if f["filename"] == want:
            return f["url"], f["hashes"]["sha256"]
    sys.exit(f"sdist-tests.py: PyPI has no {want}")


def under(name, path):
    """Whether the archive's member name is path or lies under it."""
    return name == path or name.startswith(path + "/")


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    dist, version, dest, *paths = sys.argv[1:]
    url, sha256 = sdist(dist, version)
    with urllib.request.urlopen(url, timeout=600) as r:
        data = r.read()
    if hashlib.sha256(data).hexdigest() != sha256:
        sys.exit(f"sdist-tests.py: {url} does not match the index's sha256")
    top = f"{dist}-{version}"
    wanted = [f"{top}/{p.strip('/')}" for p in paths]
    tmp = os.path.join(dest, f".{top}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = [m for m in tar.getmembers()
                       if any(under(m.name, w) for w in wanted)]
            for w in wanted:
                if not any(under(m.name, w) for m in members):
                    sys.exit(f"sdist-tests.py: {top}.tar.gz holds no {w[len(top) + 1:]}")
            tar.extractall(tmp, members=members, filter="data")
        shutil.rmtree(os.path.join(dest, top), ignore_errors=True)
        os.rename(os.path.join(tmp, top), os.path.join(dest, top))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{os.path.join(dest, top)}: {len(members)} entries ({' '.join(paths)}) from {url}")


if __name__ == "__main__":
    main()
