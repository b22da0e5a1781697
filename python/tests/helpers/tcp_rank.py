# SPDX-License-Identifier: Apache-2.0
"""One rank of a small shared segment over TcpExchange: writes its slice,
checks every other rank's. Used for ranks in separate interpreters (the
GIL test's peer, the installed-wheel smoke test)."""
import argparse
import sys
import time

import sharedseg
from tcp_exchange import TcpExchange


def delayed(exchange, call, seconds):
    """Sleeps after the call-th all-gather (2: the blobs) before returning."""
    calls = [0]

    def gather(mine):
        out = exchange(mine)
        calls[0] += 1
        if calls[0] == call:
            time.sleep(seconds)
        return out
    return gather


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--name", default="tcp-rank")
    ap.add_argument("--delay-complete", type=float, default=0.0)
    ap.add_argument("--torch", action="store_true")
    a = ap.parse_args()
    exchange = TcpExchange(a.rank, a.world, a.port)
    gather = delayed(exchange, 2, a.delay_complete) if a.delay_complete else exchange
    blocks = {"x": dict(count=a.world, shape=(256,), dtype="float32"),
              "h": dict(count=a.world, shape=(8, 16), dtype="bfloat16")}
    with sharedseg.create_shared_segment(a.name, blocks, world_size=a.world, rank_id=a.rank,
                                         exchange=gather, pages="base", timeout=20) as seg:
        xs = seg.arrays("x")
        xs[a.rank][:] = a.rank + 1
        if a.torch:
            seg.tensors("h")[a.rank].fill_(a.rank + 0.5)
        exchange(b"\0")  # barrier
        for r in range(a.world):
            assert (xs[r] == r + 1).all(), f"rank {a.rank} sees rank {r}'s slice as {xs[r][:4]}"
            if a.torch:
                assert bool(seg.tensors("h")[r].eq(r + 0.5).all())
        exchange(b"\0")  # nobody closes while another still reads
        del xs
    print(f"ok rank {a.rank} owner {seg.owner_rank} from {sharedseg.__file__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
