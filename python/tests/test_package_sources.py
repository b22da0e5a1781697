# SPDX-License-Identifier: Apache-2.0
"""tools/sdist-tests.py takes its package index from pip's configuration,
so that a machine behind a mirror or a proxy runs `make deps`: here an
index on loopback, given as pip is given one (PIP_INDEX_URL), in both of
the simple index's forms (JSON, PEP 691; HTML, PEP 503); an sdist whose
bytes are not the index's sha256 is refused and changes nothing. (That no
file of the tree names a package host is tests/structure.py's.)"""
import hashlib
import http.server
import io
import json
import os
import subprocess
import sys
import tarfile
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tools", "sdist-tests.py")
DIST, VERSION = "demo-engine", "1.2.3"
TOP = f"{DIST}-{VERSION}"


def tarball():
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, text in ((f"{TOP}/tests/v1/test_a.py", b"def test_a(): pass\n"),
                           (f"{TOP}/tests/conftest.py", b"# top\n"),
                           (f"{TOP}/setup.py", b"raise SystemExit('never run')\n")):
            info = tarfile.TarInfo(name)
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
    return out.getvalue()


class Index:
    """A simple index on 127.0.0.1: /json/ and /html/ list DIST's sdist
    with sha256 (the sha256 the index gives can be set wrong)."""

    def __init__(self):
        self.data = tarball()
        self.sha256 = hashlib.sha256(self.data).hexdigest()
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == f"/files/{TOP}.tar.gz":
                    self.answer("application/gzip", index.data)
                elif self.path == f"/json/{DIST}/":
                    body = {"meta": {"api-version": "1.0"}, "name": DIST, "files": [
                        {"filename": f"{TOP}.tar.gz", "url": f"../../files/{TOP}.tar.gz",
                         "hashes": {"sha256": index.sha256}}]}
                    self.answer("application/vnd.pypi.simple.v1+json", json.dumps(body).encode())
                elif self.path == f"/html/{DIST}/":
                    self.answer("text/html", (
                        f'<html><body><a href="../../files/{TOP}.tar.gz#sha256={index.sha256}"'
                        f' data-requires-python="&gt;=3.8">{TOP}.tar.gz</a></body></html>').encode())
                else:
                    self.send_error(404)

            def answer(self, kind, body):
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def index():
    i = Index()
    yield i
    i.close()


def fetch(index_url, dest, *paths):
    env = dict(os.environ, PIP_INDEX_URL=index_url, no_proxy="127.0.0.1", NO_PROXY="127.0.0.1")
    return subprocess.run([sys.executable, SCRIPT, DIST, VERSION, str(dest), *paths],
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("form", ["json", "html"])
def test_the_sdist_comes_from_the_index_pip_is_given(index, tmp_path, form):
    got = fetch(f"{index.url}/{form}/", tmp_path, "tests/v1", "tests/conftest.py")
    assert got.returncode == 0, got.stderr
    assert f"from {index.url}/files/{TOP}.tar.gz" in got.stdout, got.stdout
    assert (tmp_path / TOP / "tests" / "v1" / "test_a.py").read_text() == "def test_a(): pass\n"
    assert (tmp_path / TOP / "tests" / "conftest.py").exists()
    assert not (tmp_path / TOP / "setup.py").exists()


def test_bytes_that_are_not_the_index_sha256_change_nothing(index, tmp_path):
    assert fetch(f"{index.url}/json/", tmp_path, "tests/v1").returncode == 0
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    index.sha256 = "0" * 64
    got = fetch(f"{index.url}/html/", tmp_path, "tests")
    assert got.returncode == 1
    assert got.stderr.strip() == (f"sdist-tests.py: {index.url}/files/{TOP}.tar.gz does not "
                                  "match the index's sha256"), got.stderr
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


def test_a_version_the_index_lacks_is_one_sentence(index, tmp_path):
    env = dict(os.environ, PIP_INDEX_URL=f"{index.url}/json/", no_proxy="127.0.0.1",
               NO_PROXY="127.0.0.1")
    got = subprocess.run([sys.executable, SCRIPT, DIST, "9.9", str(tmp_path), "tests"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 1
    assert got.stderr.strip() == (f"sdist-tests.py: the package index {index.url}/json/ has no "
                                  f"{DIST}-9.9.tar.gz"), got.stderr
