# SPDX-License-Identifier: Apache-2.0
"""A real vLLM engine on its CPU backend whose host KV tier is a host pool
kept by a keeper ("sharedseg": {"pool": POOL, "keep": KEEPER}), driven by
test_vllm_pool.py one command at a time, so that two engines' steps are
ordered by the test, not by the scheduler:

    python vllm_pool_engine.py MODEL_DIR POOL KEEPER RESULT_FD [dtype]

It builds the engine, writes {"op": "ready"} to RESULT_FD (one JSON line
each answer), then reads commands from stdin:

    serve       one pass of vllm_engine.py's prompt (serve()): its tokens,
                cached tokens and logprobs
    reset       empties vLLM's own prefix cache (the pool is untouched)
    loop N      writes {"op": "started"}, then serves N passes, vLLM's prefix
                cache emptied before each (so each loads from the pool), and
                answers with all of them
    quit        shuts the engine down

The model is vllm_engine.py's DeepSeek-V2 (MLA), made by `vllm_engine.py
make`; dtype (default bfloat16) makes another declaration. Transfers are
traced through $SHAREDSEG_VLLM_TRACE, set by the caller.
"""
import json
import os
import sys

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0|1")

from vllm_engine import BACKEND, BLOCK, CPU_BYTES, serve  # noqa: E402


def main():
    model_dir, pool, keeper, fd = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    dtype = sys.argv[5] if len(sys.argv) > 5 else "bfloat16"
    results = os.fdopen(fd, "w", buffering=1)

    def answer(**what):
        results.write(json.dumps(what) + "\n")

    from vllm import LLM
    llm = LLM(model=model_dir, tensor_parallel_size=1, distributed_executor_backend="mp",
              kv_transfer_config={
                  "kv_connector": "OffloadingConnector", "kv_role": "kv_both",
                  "kv_connector_extra_config": {
                      "spec_name": "SharedSegOffloadingSpec", "spec_module_path": "sharedseg.vllm",
                      "cpu_bytes_to_use": CPU_BYTES,
                      "sharedseg": {"pages": "base", "pool": pool, "keep": keeper}}},
              skip_tokenizer_init=True, block_size=BLOCK["deepseek"],
              attention_backend=BACKEND["deepseek"], enable_prefix_caching=True,
              max_model_len=256, enforce_eager=True, dtype=dtype, seed=0)
    answer(op="ready")
    for line in sys.stdin:
        command = line.split()
        if command == ["serve"]:
            answer(op="serve", **serve(llm, "deepseek"))
        elif command == ["reset"]:
            llm.reset_prefix_cache()
            answer(op="reset")
        elif command[:1] == ["loop"]:
            answer(op="started")
            passes = []
            for _ in range(int(command[1])):
                llm.reset_prefix_cache()
                passes.append(serve(llm, "deepseek"))
            answer(op="loop", passes=passes)
        elif command == ["quit"]:
            break
        else:
            answer(op="error", said=f"unknown command {line!r}")
    llm.llm_engine.engine_core.shutdown()
    answer(op="quit")


if __name__ == "__main__":
    main()
