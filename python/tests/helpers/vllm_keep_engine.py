# SPDX-License-Identifier: Apache-2.0
"""One start of a real vLLM engine on its CPU backend whose host KV tier is
kept by a keeper ("sharedseg": {"keep": KEEPER}), for test_vllm_keep.py:

    python vllm_keep_engine.py MODEL_DIR TP KEEPER OUT [crash | crash-at-start]

It serves one prompt (first: from the tier when a predecessor left it),
empties vLLM's prefix cache and serves it again (from the tier, which the
first pass stored), and writes both to OUT as JSON; then it shuts the
engine down, or with "crash" kills its whole process group (the caller
starts it in a session of its own) with SIGKILL, as a crash would;
"crash-at-start" does so once the engine is built (its workers have mapped
the kept pool), before its first request, and writes OUT empty first. The
model is vllm_engine.py's DeepSeek-V2 (MLA), made by `vllm_engine.py make`.
"""
import json
import os
import signal
import sys

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0|1")

from vllm_engine import BACKEND, BLOCK, CPU_BYTES, serve  # noqa: E402


def main():
    model_dir, tp, keeper, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    from vllm import LLM

    llm = LLM(model=model_dir, tensor_parallel_size=tp, distributed_executor_backend="mp",
              kv_transfer_config={
                  "kv_connector": "OffloadingConnector", "kv_role": "kv_both",
                  "kv_connector_extra_config": {
                      "spec_name": "SharedSegOffloadingSpec", "spec_module_path": "sharedseg.vllm",
                      "cpu_bytes_to_use": CPU_BYTES,
                      "sharedseg": {"pages": "base", "keep": keeper}}},
              skip_tokenizer_init=True, block_size=BLOCK["deepseek"],
              attention_backend=BACKEND["deepseek"], enable_prefix_caching=True,
              max_model_len=256, enforce_eager=True, dtype="bfloat16", seed=0)
    if sys.argv[5:] == ["crash-at-start"]:
        with open(out, "w") as f:
            json.dump({}, f)
        os.killpg(os.getpgid(0), signal.SIGKILL)
    seen = dict(first=serve(llm, "deepseek"))
    llm.reset_prefix_cache()
    seen["tier"] = serve(llm, "deepseek")
    with open(out, "w") as f:
        json.dump(seen, f)
    if sys.argv[5:] == ["crash"]:
        os.killpg(os.getpgid(0), signal.SIGKILL)
    llm.llm_engine.engine_core.shutdown()


if __name__ == "__main__":
    main()
