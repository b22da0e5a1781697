# SPDX-License-Identifier: Apache-2.0
"""The host pool through the Python package: what HostPool promises, with
several processes of one pool by name, a killed process's pins given back,
and the sentences a user reads."""
import hashlib
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import sharedseg
from sharedseg import HostPool, SharedSegmentError, pool_key, pool_keys

MEANING = "model=tiny;dtype=bfloat16;block=16;tp=1;seed=0"


@pytest.fixture
def name(request):
    return f"pytest-pool-{os.getpid()}-{abs(hash(request.node.name)) % 10**6}"


def fill(view, n):
    view[:] = hashlib.sha256(str(n).encode()).digest() * (len(view) // 32)


def holds(view, n):
    return bytes(view) == hashlib.sha256(str(n).encode()).digest() * (len(view) // 32)


def test_store_and_get(name):
    with HostPool.open(name, meaning=MEANING, chunk_size=4096, chunks=8, pages="base") as p:
        info = p.info()
        assert info["created"] and info["chunks"] == 8 and info["pages"] == "base"
        assert info["attached"] == [os.getpid()]
        from sharedseg import list_pools  # the memfd's inode, as `sharedseg ls` shows it
        assert info["inode"] == next(x["inode"] for x in list_pools() if x["name"] == name) > 0
        chunks = p.reserve([f"block-{i}" for i in range(3)])
        assert None not in chunks
        for i, c in enumerate(chunks):
            fill(p.chunk(c), i)
        assert p.publish(chunks) == 3
        got = p.get([f"block-{i}" for i in range(4)])
        assert got[3] is None and got[:3] == chunks
        assert all(holds(p.chunk(c), i) for i, c in enumerate(got[:3]))
        assert p.contains(pool_keys(["block-0", "x", "block-2"]), prefix=True) == 1
        assert p.reserve(["block-1"]) == [None]  # stored already
        p.unpin(got)
        assert p.drop(["block-0"]) == 1
        info = p.info()
        assert (info["used"], info["stores"], info["pinned"]) == (2, 3, 0)


def test_key_forms():
    assert pool_key(b"k" * 32) == b"k" * 32
    assert pool_key("text") == hashlib.sha256(b"text").digest()
    assert pool_key(b"short") == hashlib.sha256(b"short").digest()
    assert pool_keys(["a", "b"]) == pool_key("a") + pool_key("b")


def test_sentences(name):
    with HostPool.open(name, meaning=MEANING, chunk_size=4096, chunks=2, pages="base") as p:
        with pytest.raises(SharedSegmentError, match="field 3 is 'block=16', this process "
                           "declares 'block=32'"):
            HostPool.open(name, meaning=MEANING.replace("block=16", "block=32"))
        with pytest.raises(ValueError, match="not a whole number of 32-byte keys"):
            p.get(b"x" * 33)
        c = p.reserve(["a", "b"])
        with pytest.raises(SharedSegmentError, match="pinned or being filled") as e:
            p.reserve(["c"])
        assert e.value.errno == 28  # ENOSPC
        p.abandon(c)
        with pytest.raises(SharedSegmentError, match="not pinned by this handle"):
            p.unpin([0])
    with pytest.raises(SharedSegmentError, match="no pool"):
        HostPool.open(name + "-none", existing=True)
    with pytest.raises(ValueError, match="closed"):
        p.get(pool_key("a"))


CHILD = textwrap.dedent("""
    import sys
    from sharedseg import HostPool
    name, mode = sys.argv[1], sys.argv[2]
    p = HostPool.open(name, meaning=%r, map_only=(mode == "map"))
    if mode == "read":
        got = p.get(["k1", "k2"])
        print(got, bytes(p.chunk(got[0])[:4]), flush=True)
        c = p.reserve(["k3"])
        p.chunk(c[0])[:4] = b"kid!"
        p.publish(c)
    elif mode == "pin-and-die":
        print(p.get(["k1"]), p.reserve(["k9"]), flush=True)
        sys.stdin.read()  # killed here
    elif mode == "map":
        print(bytes(p.chunk(int(sys.argv[3]))[:4]), flush=True)
""") % MEANING


def child(name, *args, **kw):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(sharedseg.__file__)))
    return subprocess.Popen([sys.executable, "-c", CHILD, name, *args], env=env,
                            stdout=subprocess.PIPE, text=True, **kw)


def test_other_processes(name):
    with HostPool.open(name, meaning=MEANING, chunk_size=4096, chunks=4, pages="base") as p:
        c = p.reserve(["k1"])
        p.chunk(c[0])[:4] = b"mom!"
        p.publish(c)
        out, _ = child(name, "read").communicate(timeout=60)
        assert out.split("] ")[1].strip() == "b'mom!'" and "None]" in out
        (got,) = p.get(["k3"])
        assert bytes(p.chunk(got)[:4]) == b"kid!"
        out, _ = child(name, "map", str(got)).communicate(timeout=60)
        assert out.strip() == "b'kid!'"
        p.unpin([got])

        # a process killed with a pin and a half-done store: both come back
        kid = child(name, "pin-and-die", stdin=subprocess.PIPE)
        line = kid.stdout.readline()
        assert line.startswith("[0] [")
        assert len(p.info()["attached"]) == 2 and p.info()["filling"] == 1
        kid.send_signal(signal.SIGKILL)
        kid.wait(timeout=60)
        kid.stdout.close()
        kid.stdin.close()
        assert p.get(["k9"]) == [None]
        p.check()  # frees what the dead held
        info = p.info()
        assert info["reclaims"] == 1 and info["filling"] == 0 and info["pinned"] == 0
        assert info["attached"] == [os.getpid()]


def test_the_example():
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "examples", "pool.py")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(sharedseg.__file__)))
    run = subprocess.run([sys.executable, example], capture_output=True, text=True, env=env,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "loaded: the prefix's KV\n"
