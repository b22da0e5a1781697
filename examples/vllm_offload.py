# SPDX-License-Identifier: Apache-2.0
"""vLLM with its host KV tier in one sharedseg segment per TP group.

The engine is configured as for vLLM's own CPU offloading, with our spec
named: every rank of the TP group maps one segment (one copy for MLA models,
whose KV is the same in every rank), no file in /dev/shm. It runs on vLLM's
CUDA platform and on its CPU backend (which has no KV offloading without
it). This serves one prompt, empties the engine's prefix cache, serves it
again and says how many of its tokens the second pass did not compute.

    python3 examples/vllm_offload.py MODEL [TP]
"""
import sys


def make_llm(model, tp=1, cpu_bytes=8 << 30, pages="auto", **engine_args):
    """A vLLM engine whose offloaded KV lives in a sharedseg segment."""
    from vllm import LLM
    return LLM(model=model, tensor_parallel_size=tp, distributed_executor_backend="mp",
               kv_transfer_config={
                   "kv_connector": "OffloadingConnector",
                   "kv_role": "kv_both",
                   "kv_connector_extra_config": {
                       "spec_name": "SharedSegOffloadingSpec",
                       "spec_module_path": "sharedseg.vllm",
                       "cpu_bytes_to_use": cpu_bytes,
                       "sharedseg": {"pages": pages, "populate": "owner"},
                   }},
               **engine_args)


def main():
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    model, tp = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1
    llm = make_llm(model, tp, cpu_bytes=1 << 30, skip_tokenizer_init=True, max_model_len=512)
    prompt = TokensPrompt(prompt_token_ids=[(7 * i + 3) % 500 + 1 for i in range(300)])
    params = SamplingParams(max_tokens=8, temperature=0)
    first = llm.generate([prompt], params, use_tqdm=False)[0]
    llm.reset_prefix_cache()
    second = llm.generate([prompt], params, use_tqdm=False)[0]
    print(f"first pass: {first.num_cached_tokens} cached tokens; after emptying the prefix "
          f"cache: {second.num_cached_tokens} of {len(prompt['prompt_token_ids'])} tokens "
          f"loaded from the sharedseg segment; same tokens: "
          f"{first.outputs[0].token_ids == second.outputs[0].token_ids}")


if __name__ == "__main__":
    main()
