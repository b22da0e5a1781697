# SPDX-License-Identifier: Apache-2.0
"""Fetches part of an engine's own tests from its sdist on PyPI, for
the tests that run an engine's own test files on sharedseg's classes
(python/tests/test_vllm_own.py). tools/install-deps.sh runs it once per
machine and version.

  sdist-tests.py DIST VERSION DEST PATH...
      downloads DIST-VERSION.tar.gz from the package index pip is
      configured with, checks its sha256 against the index's, and extracts
      each PATH (a folder or a file) of DIST-VERSION into DEST/DIST-VERSION,
      replacing what was there; nothing is changed in DEST on failure

The index is the one pip would use here (PIP_INDEX_URL, pip's
configuration files, else pip's default), read with the interpreter's pip:
a machine behind a mirror or a proxy reaches it; the tree names no package
host. Its simple index is read as JSON (PEP 691) or HTML (PEP 503)."""
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import re
import urllib.parse
import urllib.request


def index_url():
    """The simple index pip is configured with here, as pip reads it."""
    try:
        from pip._internal.configuration import Configuration
        from pip._internal.models.index import PyPI
    except ImportError:
        sys.exit(f"sdist-tests.py: {sys.executable} has no pip to say which package index "
                 "this machine uses")
    url = os.environ.get("PIP_INDEX_URL")
    if not url:
        config = Configuration(isolated=False)
        config.load()
        for key in ("download.index-url", "install.index-url", "global.index-url"):
            try:
                url = config.get_value(key)
                break
            except Exception:  # pip's ConfigurationError: the key is not set
                continue
    return (url or PyPI.simple_url).rstrip("/") + "/"


def listing(index, dist):
    """[(filename, url, sha256 or None)] of dist's page in the index."""
    page = urllib.parse.urljoin(index, dist + "/")
    req = urllib.request.Request(page, headers={
        "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
    with urllib.request.urlopen(req, timeout=60) as r:
        kind, body = r.headers.get("Content-Type", ""), r.read()
    if "json" in kind:
        return [(f["filename"], urllib.parse.urljoin(page, f["url"]),
                 f.get("hashes", {}).get("sha256")) for f in json.loads(body)["files"]]
    found = []
    for href in re.findall(r'<a\s[^>]*href="([^"]+)"', body.decode("utf-8", "replace")):
        url, _, fragment = urllib.parse.urljoin(page, href.replace("&amp;", "&")).partition("#")
        name = urllib.parse.unquote(url.rsplit("/", 1)[-1])
        sha = fragment[len("sha256="):] if fragment.startswith("sha256=") else None
        found.append((name, url, sha))
    return found


def sdist(dist, version):
    """The sdist's URL and sha256 from the index."""
    index = index_url()
    want = f"{dist}-{version}.tar.gz"
    for name, url, sha256 in listing(index, dist):
        if name == want:
            if not sha256:
                sys.exit(f"sdist-tests.py: {index} gives no sha256 for {want}")
            return url, sha256
    sys.exit(f"sdist-tests.py: the package index {index} has no {want}")


def extract(tar, dest, members):
    """The members under dest, as plain files and folders only: the "data"
    filter where this Python has it (3.11.4+), else the same refusals."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, members=members, filter="data")
        return
    for m in members:
        parts = m.name.split("/")
        if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in parts:
            sys.exit(f"sdist-tests.py: {m.name}: not a plain file or folder inside the sdist")
    tar.extractall(dest, members=members)


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
            extract(tar, tmp, members)
        shutil.rmtree(os.path.join(dest, top), ignore_errors=True)
        os.rename(os.path.join(tmp, top), os.path.join(dest, top))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{os.path.join(dest, top)}: {len(members)} entries ({' '.join(paths)}) from {url}")


if __name__ == "__main__":
    main()
