# SPDX-License-Identifier: Apache-2.0
"""The frame of the engines' rank scripts (vllm_ranks.py, sglang_ranks.py,
lmcache_ranks.py): `python SCRIPT SCENARIOS WORLD PORT OUT` spawns WORLD
ranks, each runs the script's body and writes what it saw, or its
traceback as {"crash": ...}, to OUT/rank<N>.json (conftest.run_rank_script
reads them). A rank that crashed leaves at once, its traceback written:
threads its engine started (LMCache's) would keep it alive, and the run
would wait for it until the test's timeout."""
import json
import os
import sys
import traceback

import torch.multiprocessing as mp


def _rank(rank, body, scenarios, world, port, out):
    try:
        seen = body(rank, scenarios, world, port)
    except Exception:
        seen = dict(crash=traceback.format_exc())
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(seen, f)
    if "crash" in seen:
        sys.stderr.flush()
        os._exit(1)


def main(body):
    """body(rank, scenarios, world, port) -> what the rank saw (JSON)."""
    scenarios, world, port, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    mp.spawn(_rank, args=(body, scenarios, world, port, out), nprocs=world)
