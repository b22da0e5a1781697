# SPDX-License-Identifier: Apache-2.0
"""One SGLang "engine" process for test_sglang_storage.py: SGLang's own host
pool (MLA or MHA, on CPU) with the storage backend SGLang's factory builds
from the documented extra config, as its cache controller does (create,
then register the host pool). Reads commands on stdin, one a line, and
answers each with one JSON line:
    store FIRST N        N pages, page i filled from i's seed, stored
    load FIRST N         how many of N leading pages exist; those loaded into
                         fresh host pages, each compared with its seed
    info                 the pool's info (HostPool.info)
    quit
argv: pool name, kind ("mla" or "mha"), tp_rank, tp_size, extra JSON
(merged into the documented config), page tokens."""
import json
import sys

import torch

import sglang_ranks


def page_of(seed, numel, dtype):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(numel, generator=g).to(dtype)


def main():
    name, kind, tp_rank, tp_size, extra = sys.argv[1:6]
    tp_rank, tp_size = int(tp_rank), int(tp_size)
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorageConfig
    from sglang.srt.mem_cache.storage import StorageBackendFactory
    host = (sglang_ranks.mla_pool("layer_first")[0] if kind == "mla"
            else sglang_ranks.mha_pool(tp_rank))
    config = {"backend_name": "sharedseg", "module_path": "sharedseg.engines.sglang.storage",
              "class_name": "HostPoolStorage", "interface_v1": 1, "pool": name,
              "size": "1MiB", "pages": "base"}
    config.update(json.loads(extra))
    storage_config = HiCacheStorageConfig(
        tp_rank=tp_rank, tp_size=tp_size, pp_rank=0, pp_size=1, attn_cp_rank=0,
        attn_cp_size=1, is_mla_model=kind == "mla", enable_storage_metrics=False,
        is_page_first_layout=False, model_name="tiny", extra_config=config)
    try:
        backend = StorageBackendFactory.create_backend("dynamic", storage_config, host)
        backend.register_mem_pool_host(host)
    except Exception as e:  # the refusal a user reads
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        return
    page, dummy = host.page_size, host.get_dummy_flat_data_page()
    print(json.dumps({"ready": type(backend).__name__}), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "quit":
            break
        if cmd[0] == "info":
            print(json.dumps(backend.pool.info()), flush=True)
            continue
        first, n = int(cmd[1]), int(cmd[2])
        keys = [f"page-{first + i}" for i in range(n)]
        indices = host.alloc(n * page)
        seeds = [1000 * tp_rank * (kind == "mha") + first + i for i in range(n)]
        if cmd[0] == "store":
            for i, seed in enumerate(seeds):
                host.set_from_flat_data_page(int(indices[i * page]),
                                             page_of(seed, dummy.numel(), dummy.dtype))
            ok = backend.batch_set_v1(keys, indices)
            print(json.dumps({"stored": ok}), flush=True)
        elif cmd[0] == "load":
            hits = backend.batch_exists(keys)
            got = backend.batch_get_v1(keys[:hits], indices)
            same = [bool(torch.equal(host.get_data_page(int(indices[i * page])).view(torch.int16),
                                     page_of(seeds[i], dummy.numel(),
                                             dummy.dtype).view(torch.int16)))
                    for i in range(hits)]
            print(json.dumps({"exists": hits, "got": got, "same": same}), flush=True)
        host.free(indices)
    backend.close()


if __name__ == "__main__":
    main()
