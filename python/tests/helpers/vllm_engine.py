# SPDX-License-Identifier: Apache-2.0
"""A real vLLM engine on its CPU backend with SharedSegOffloadingSpec, on a
tiny random-weights model this script makes (no hub access). It serves one
prompt four times and writes what it saw to OUT as JSON; test_vllm.py
asserts on it:

    cold     the first pass (computes the KV, rank 0 or every rank stores it)
    engine   the same prompt again (the engine's own prefix cache, where
             the CPU backend keeps one: not for MLA models)
    segment  after reset_prefix_cache(): the KV is loaded from the segment
    again    once more after another reset: loaded from the segment again

    python vllm_engine.py MODEL TP OUT      MODEL: deepseek (MLA) or llama
    python vllm_engine.py make MODEL PATH    only makes the model, in PATH

Transfers are traced through $SHAREDSEG_VLLM_TRACE, set by the caller.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "examples"))

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0|1")

CPU_BYTES = 64 << 20
BLOCK = {"deepseek": 16, "llama": 32}   # the CPU attention backends' block sizes
# Named, not chosen by vLLM: its CPU platform takes AMX_MLA (blocks of 32
# and more) where the CPU has AMX tiles and CPU_MLA (blocks of 16) where it
# has not, and a pass must be the same on every host.
BACKEND = {"deepseek": "CPU_MLA", "llama": "CPU_ATTN"}
PROMPT = {"deepseek": 65, "llama": 130}  # tokens: four full blocks and one more


def model_config(kind):
    """The tiny model's transformers config (a config.json of it is enough
    for vLLM's ModelConfig)."""
    import transformers
    if kind == "deepseek":
        # The CPU MLA backend takes only a 576-wide latent: kv_lora_rank 512
        # plus qk_rope_head_dim 64. Two dense layers, no MoE.
        return transformers.DeepseekV2Config(
            vocab_size=512, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
            num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
            n_shared_experts=1, n_routed_experts=4, num_experts_per_tok=2,
            first_k_dense_replace=2, kv_lora_rank=512, q_lora_rank=None, qk_rope_head_dim=64,
            qk_nope_head_dim=32, v_head_dim=32, max_position_embeddings=512)
    return transformers.LlamaConfig(
        vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, head_dim=64,
        max_position_embeddings=512)


def make_model(kind, path):
    import torch
    import transformers
    torch.manual_seed(0)
    cfg = model_config(kind)
    model = (transformers.DeepseekV2ForCausalLM if kind == "deepseek"
             else transformers.LlamaForCausalLM)(cfg)
    model.to(torch.bfloat16).save_pretrained(path)


def shmem_kib():
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Shmem:"))


def serve(llm, kind):
    """One pass of the test's prompt (PROMPT[kind] tokens, four greedy ones
    out): the tokens, vLLM's count of cached prompt tokens, and the top-5
    logprobs as float.hex, to compare bit for bit."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    prompt = TokensPrompt(prompt_token_ids=[(7 * i + 3) % 500 + 1 for i in range(PROMPT[kind])])
    params = SamplingParams(max_tokens=4, logprobs=5, temperature=0)
    o = llm.generate([prompt], params, use_tqdm=False)[0]
    c = o.outputs[0]
    return dict(tokens=list(c.token_ids), cached=o.num_cached_tokens,
                logprobs=[{str(k): v.logprob.hex() for k, v in d.items()} for d in c.logprobs])


def main():
    if sys.argv[1] == "make":
        make_model(sys.argv[2], sys.argv[3])
        return
    kind, tp, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    model_dir = out + ".model"
    make_model(kind, model_dir)

    import sharedseg
    from vllm_offload import make_llm  # the example's configuration, as users copy it

    shmem_before = shmem_kib()
    llm = make_llm(model_dir, tp, cpu_bytes=CPU_BYTES, pages="base", skip_tokenizer_init=True,
                   block_size=BLOCK[kind], attention_backend=BACKEND[kind],
                   enable_prefix_caching=True, max_model_len=256,
                   enforce_eager=True, dtype="bfloat16", seed=0)
    seen = dict(cold=serve(llm, kind), engine=serve(llm, kind))
    seen["reset"] = llm.reset_prefix_cache()
    seen["segment"] = serve(llm, kind)
    llm.reset_prefix_cache()
    seen["again"] = serve(llm, kind)
    # This engine's segment, as its workers name it in the trace: other
    # engines may run on the host at the same time.
    with open(os.environ["SHAREDSEG_VLLM_TRACE"]) as f:
        name = json.loads(f.readline())["segment"]
    seen["segments"] = [dict(name=s["name"], size=s["size"], world_size=s["world_size"],
                             pages=s["pages"], resident_bytes=s["resident_bytes"],
                             processes=len(s["processes"]))
                        for s in sharedseg.list_segments() if s["name"] == name]
    seen["shmem_growth"] = (shmem_kib() - shmem_before) * 1024
    engine_id = name[len("vllm-"):]
    seen["dev_shm"] = [n for n in os.listdir("/dev/shm")
                       if n.startswith(f"vllm_offload_{engine_id}")]
    with open(out, "w") as f:
        json.dump(seen, f)
    llm.llm_engine.engine_core.shutdown()


if __name__ == "__main__":
    main()
