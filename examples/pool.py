# SPDX-License-Identifier: Apache-2.0
"""One host pool, two processes: this one stores a block under its key; a
second process (another engine, say) opens the pool by its name and loads
the block, with no copy between the two and no server.

    python3 examples/pool.py

(python/tests/test_pool.py runs it.)"""
import subprocess
import sys

from sharedseg import HostPool


def open_pool():
    return HostPool.open("example-pool-py", meaning="model=demo;dtype=bfloat16;block=16",
                         chunk_size=64 << 10, chunks=256)


def load():
    with open_pool() as pool:
        (chunk,) = pool.get(["block-0"])  # pinned: nobody evicts it meanwhile
        print("loaded:", bytes(pool.chunk(chunk)[:15]).decode())
        pool.unpin([chunk])


def store():
    with open_pool() as pool:
        (chunk,) = pool.reserve(["block-0"])  # None: stored already
        pool.chunk(chunk)[:15] = b"the prefix's KV"  # straight into the pool
        pool.publish([chunk])
        subprocess.run([sys.executable, __file__, "load"], check=True)


if __name__ == "__main__":
    load() if sys.argv[1:] == ["load"] else store()
