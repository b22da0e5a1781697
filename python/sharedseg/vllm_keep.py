# SPDX-License-Identifier: Apache-2.0
"""A vLLM host KV tier that outlives its engine ("sharedseg": {"keep":
NAME}): sharedseg.engines.vllm.keep, by the name it had before the
engines had a package of their own."""
from .engines.vllm import ENGINE
from .engines.vllm.keep import (CLAIM_BYTES, DESC_MAX, ENTRY, FORMAT, INDEX_HEADER, KEY_MAX,
                                MAGIC, KeptOffloadingManager, NotKept, TierBusy, TierIndex,
                                Unreadable, claim_of, claim_tier, description, differences,
                                index_bytes, lend_index, segment_name, unstable_hashes)

__all__ = ["ENGINE", "CLAIM_BYTES", "DESC_MAX", "ENTRY", "FORMAT", "INDEX_HEADER", "KEY_MAX",
           "MAGIC", "KeptOffloadingManager", "NotKept", "TierBusy", "TierIndex", "Unreadable",
           "claim_of", "claim_tier", "description", "differences", "index_bytes", "lend_index",
           "segment_name", "unstable_hashes"]
