# SPDX-License-Identifier: Apache-2.0
"""SGLang's Mooncake storage tier over the group's one copy: one fetch per
host.

With SHAREDSEG_SGLANG set, the plugin (plugin.py) registers this class as
SGLang's "mooncake" storage backend, so the line users already run
(--hicache-storage-backend mooncake) builds it. It is SGLang's own
MooncakeStore (0.5.23) with one change, for a pool whose bytes are the same
on every rank of the attention-TP group (MLA) and that lives in one
sharedseg segment: the ranks that map one copy split each prefetch, each
fetching its share of the pages from Mooncake into the shared pages,
instead of every rank fetching every page into a private copy. The host's
network then carries one copy of a prefix, not one a rank.

Why no rank reads a page still in flight, from SGLang's code
(managers/cache_controller.py, 0.5.23): batch_get_v1 has one caller,
HiCacheController._page_transfer, which reports each batch's completed
tokens as a PrefetchAck; the prefetch sync thread MIN-all-reduces every
ack's completed tokens over the attention-TP (and CP, PP) ranks before the
scheduler sees it (_reduce_prefetch_ack), and the scheduler drains acks
only as far as every rank has them (a MIN all-reduce of the queue sizes).
A rank that fetches reports a batch's pages complete only after its
batch_get_into returned; so a count every rank agrees on covers only pages
their fetchers have filled, and the host pages of an ended prefetch are
let go only once every rank's transfer has returned. Each rank answers the
pages it leaves to the others as fetched: the MIN takes the first page any
fetcher failed.

Everything else is SGLang's: writes (rank 0 alone writes an MLA page, as
SGLang does), existence queries (each rank asks; they are small), pools
that differ per rank (MHA: each rank fetches its own keys), side pools
(batch_get_v2), and an MLA pool under decode context parallelism (each
rank's shard its own: the plugin gives it a slot a rank, as it does MHA's).
Mooncake's standalone storage (its own memfd, handed to a
client process of its own) needs Mooncake's allocator under the pool, and
is refused with a sentence.
"""
from typing import Any, List, Optional

from . import ENGINE, MOONCAKE, MOONCAKE_ADAPTER

_Store = ENGINE.get(f"{MOONCAKE}.MooncakeStore", object)


def refused_standalone() -> str:
    return ("sharedseg.sglang serves SGLang's Mooncake backend with its embedded client "
            "(each rank's, registering the pool's pages); Mooncake's standalone_storage maps "
            "the host pool from Mooncake's own allocator into a client process of its own, "
            "which the one shared copy is not: set standalone_storage to false, or unset "
            "SHAREDSEG_SGLANG")


class SharedMooncakeStore(_Store):  # type: ignore[misc, valid-type]
    """SGLang's MooncakeStore whose prefetch into a shared pool is split
    over the ranks that map the pool's one copy. fetchers: those ranks (in
    the segment's group), and mine: this rank's place among them; None
    where every rank fetches all (a pool of each rank's own)."""

    def __init__(self, storage_config: Any = None, mem_pool: Any = None):
        ENGINE.check(MOONCAKE_ADAPTER)
        config = self._load_config(storage_config)
        if config.standalone_storage:
            raise RuntimeError(refused_standalone())
        super().__init__(storage_config, mem_pool)
        self.fetchers: Optional[List[int]] = None
        self.mine = 0
        seg = _shared_copy(mem_pool)
        if seg is not None and self.is_mla_backend and len(seg.sharing_ranks) > 1:
            self.fetchers = list(seg.sharing_ranks)
            self.mine = self.fetchers.index(seg.rank)
        # pages this rank asked Mooncake for, and pages it left to others
        self.pages_fetched = self.pages_left = 0

    def batch_get_v1(self, keys: List[str], host_indices: Any,
                     extra_info: Any = None) -> List[bool]:
        if self.fetchers is None or not keys:
            self.pages_fetched += len(keys)
            return super().batch_get_v1(keys, host_indices, extra_info)
        n = len(self.fetchers)
        page = len(host_indices) // len(keys)
        mine = [i for i in range(len(keys)) if i % n == self.mine]
        result = [True] * len(keys)
        if mine:
            import torch
            indices = torch.cat([host_indices[i * page:(i + 1) * page] for i in mine])
            got = super().batch_get_v1([keys[i] for i in mine], indices, extra_info)
            for i, ok in zip(mine, got):
                result[i] = ok
        self.pages_fetched += len(mine)
        self.pages_left += len(keys) - len(mine)
        return result


def _shared_copy(mem_pool: Any) -> Any:
    """The segment of a pool our allocator serves as one copy for the
    group (replicated), or None."""
    from .plugin import SharedSegHostTensorAllocator
    allocator = getattr(mem_pool, "allocator", None)
    if not isinstance(allocator, SharedSegHostTensorAllocator) or not allocator.replicated:
        return None
    return allocator.segments[0] if allocator.segments else None

