# SPDX-License-Identifier: Apache-2.0
"""One LMCache instance (LMCache's own engine, built by LMCacheEngineBuilder
from $LMCACHE_CONFIG_FILE: docs/integrations.md's host pool configuration)
whose host tier is the host pool, driven by test_lmcache_pool.py one
command at a time:

    python lmcache_pool_engine.py RESULT_FD [MODEL_SUFFIX]

It builds the engine, answers {"op": "ready"} on RESULT_FD (a JSON line each
answer), then reads commands from stdin:

    store N       stores tokens 0..N-1 (LMCache's MockGPUConnector; each
                  chunk's bytes are its first token's number plus one)
    drop-local    empties LMCache's own CPU tier (the hot tier), so that the
                  next retrieve must come from the pool
    retrieve N    looks tokens 0..N-1 up and retrieves them: the tokens LMCache
                  found, each retrieved chunk's distinct values, and the pool's
                  facts
    pin N         looks tokens 0..N-1 up with pin, and holds the pins
    settle N      waits until LMCache's remote tier (if any) has no put in
                  flight and finds tokens 0..N-1: what was stored is in the
                  remote store, as the next instance will ask it
    drop-remote N removes tokens 0..N-1's chunks from the Mooncake store behind
                  LMCache's remote tier (as Mooncake evicts them; LMCache's
                  Mooncake connector has no remove of its own)
    quit          destroys the engine

KV: an MLA model of 2 layers, chunks of 16 tokens of a 576-wide latent in
bfloat16; world size 1 (an instance, as each vLLM engine at TP=1 has its
own). MODEL_SUFFIX makes another model (another declaration).
"""
import json
import os
import sys

import torch

KV_SHAPE = (2, 1, 16, 1, 576)


def main():
    results = os.fdopen(int(sys.argv[1]), "w", buffering=1)
    model = "tiny-mla" + (sys.argv[2] if len(sys.argv) > 2 else "")

    def answer(**what):
        results.write(json.dumps(what) + "\n")

    from lmcache.v1.cache_engine import LMCacheEngineBuilder
    from lmcache.v1.config import LMCacheEngineConfig
    from lmcache.v1.gpu_connector.mock_gpu_connector import MockGPUConnector
    from lmcache.v1.metadata import LMCacheMetadata

    seen = []

    class Device(MockGPUConnector):
        """from_gpu: each chunk is its first token's number plus one; to_gpu:
        what each retrieved chunk holds, kept to answer with."""
        def batched_from_gpu(self, memory_objs, starts, ends, **kwargs):
            for obj, start in zip(memory_objs, starts):
                obj.tensor.fill_(start + 1)

        def batched_to_gpu(self, memory_objs, starts, ends, **kwargs):
            for obj, start in zip(memory_objs, starts):
                seen.append([start, sorted(set(obj.tensor.float().flatten().tolist()))])

        def to_gpu(self, memory_obj, start, end, **kwargs):
            self.batched_to_gpu([memory_obj], [start], [end])

    cfg = LMCacheEngineConfig.from_file(os.environ["LMCACHE_CONFIG_FILE"])
    cfg.chunk_size = KV_SHAPE[2]
    metadata = LMCacheMetadata(model_name=model, world_size=1, local_world_size=1, worker_id=0,
                               local_worker_id=0, kv_dtype=torch.bfloat16, kv_shape=KV_SHAPE,
                               use_mla=True, role="worker")
    # one rank: LMCache's broadcasts to the others have no one to reach
    engine = LMCacheEngineBuilder.get_or_create("pool", cfg, metadata, Device(KV_SHAPE),
                                                lambda t, src: None, lambda o, src: o)
    engine.post_init()
    manager = engine.storage_manager
    plugin = manager.storage_backends.get("sharedseg_pool")
    answer(op="ready", backends=list(manager.storage_backends),
           plugin=type(plugin).__name__ if plugin else None)
    for line in sys.stdin:
        command = line.split()
        n = int(command[1]) if len(command) > 1 else 0
        if command[:1] == ["store"]:
            engine.store(tokens=torch.arange(n))
            answer(op="store", facts=plugin.pool.info())
        elif command == ["drop-local"]:
            manager.storage_backends["LocalCPUBackend"].clear()
            answer(op="drop-local")
        elif command[:1] == ["retrieve"]:
            seen.clear()
            found = engine.lookup(tokens=torch.arange(n))
            got = engine.retrieve(torch.arange(n))
            answer(op="retrieve", found=found, retrieved=int(got.sum()), chunks=seen,
                   facts=plugin.pool.info())
        elif command[:1] == ["pin"]:
            answer(op="pin", found=engine.lookup(tokens=torch.arange(n), lookup_id="held",
                                                 pin=True),
                   facts=plugin.pool.info())
        elif command[:1] == ["settle"]:
            import time
            remote = [name for name in manager.storage_backends
                      if name.startswith("RemoteBackend")]
            backends = [manager.storage_backends[name] for name in remote]
            deadline = time.monotonic() + 120
            # LMCache's own record of its puts in flight (emptied by their
            # completions on its loop thread), then the remote store's own
            # answer: a put completed may take a moment to be found there
            while time.monotonic() < deadline and (
                    any(b.put_tasks for b in backends) or
                    engine.lookup(tokens=torch.arange(n), search_range=remote) < n):
                time.sleep(0.05)
            answer(op="settle", remote=len(remote),
                   in_flight=sum(len(b.put_tasks) for b in backends),
                   found=engine.lookup(tokens=torch.arange(n), search_range=remote),
                   put_failed=sum(b.put_failed_count for b in backends))
        elif command[:1] == ["drop-remote"]:
            stores = []
            for name, b in manager.storage_backends.items():
                conn = b.connection if name.startswith("RemoteBackend") else None
                while conn is not None and not hasattr(conn, "store"):
                    conn = getattr(conn, "_connector", None)  # LMCache's wrappers
                if conn is not None:
                    stores.append(conn.store)
            keys = [key for _, _, key in engine.token_database.process_tokens(
                tokens=torch.arange(n))]
            # Mooncake's remove: 0 when removed; force past the leases reads took
            answer(op="drop-remote", stores=len(stores),
                   removed=sum(s.remove(k.to_string(), True) == 0 for s in stores for k in keys))
        elif command == ["quit"]:
            break
    LMCacheEngineBuilder.destroy("pool")
    answer(op="quit")


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        # LMCache's storage loop thread (no daemon) would keep the process,
        # and the test waiting on its answers, alive
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
