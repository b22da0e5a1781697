# SPDX-License-Identifier: Apache-2.0
# The Python call of docs/python.md, exactly as it stands there
# (tests/readme.py checks the block against these lines); gloo_ranks.exact_call runs it with
# num_layers, k_shape, v_shape, tp_size, tp_rank, tp_group and torch given.
from sharedseg import create_shared_segment
seg = create_shared_segment(
    "vllm_sparse_kv",
    blocks={
        "k": dict(count=num_layers, shape=k_shape, dtype=torch.bfloat16),
        "v": dict(count=num_layers, shape=v_shape, dtype=torch.bfloat16),
    },
    world_size=tp_size,
    rank_id=tp_rank,
    tp_group=tp_group,
)
k_caches_cpu = seg.tensors("k")   # list of num_layers zero-copy CPU tensors
