# SPDX-License-Identifier: Apache-2.0
"""SGLang's HiCache storage tier on the host pool (sharedseg.HostPool): every
SGLang engine and data-parallel rank of one model on the host stores its
pages in one pool and finds the pages the others stored, at the cost of a
copy from host memory, and an engine started later (a restart) finds what
earlier ones stored while any of them, or the keeper, holds the pool.

SGLang loads it as an out-of-tree backend, with its own flags:

    --hicache-storage-backend dynamic --hicache-storage-backend-extra-config
    '{"backend_name": "sharedseg", "module_path": "sharedseg.engines.sglang.storage",
      "class_name": "HostPoolStorage", "interface_v1": 1, "pool": "kv"}'

Settings in the same object: "pool" (the pool's name, required), "size"
(a new pool's bytes, e.g. "64GiB"; default 4 GiB; an engine that finds the
pool takes it as it is), "keeper" (a keeper
that holds the pool between engines), "pages" (auto, base, thp,
hugetlb-2M). A page is one chunk; its key is SGLang's page hash, with the
TP and PP rank for a model whose ranks hold different heads (MHA) and
without for MLA, whose ranks hold the same page (SGLang's first rank
alone writes it). The pool's meaning is the model, the page's geometry
and dtype, and the ranks' layout: another SGLang configuration on the
same pool name is refused with the field named."""
import errno
import logging
from typing import Any, List, Optional

import torch

from . import ENGINE, STORAGE
from ... import HostPool, SharedSegmentError, pool_key
from ..base import parse_size, pool_meaning

_log = logging.getLogger("sharedseg.sglang")

ENGINE.check(STORAGE)  # another SGLang: a sentence, before its names are used
HiCacheStorage = ENGINE.get("sglang.srt.mem_cache.hicache_storage.HiCacheStorage")

DEFAULT_SIZE = 4 << 30


def _settings(storage_config) -> dict:
    extra = dict(getattr(storage_config, "extra_config", None) or {})
    if not extra.get("pool"):
        raise ValueError("sharedseg's SGLang storage backend needs the pool's name: add "
                         '"pool": "NAME" to --hicache-storage-backend-extra-config')
    return extra


class HostPoolStorage(HiCacheStorage):
    """A HiCacheStorage whose pages live in a sharedseg host pool (see the
    module's text for the line that switches it on)."""

    def __init__(self, storage_config: Any, kwargs: Optional[Any] = None):
        self.config = storage_config
        self.settings = _settings(storage_config)
        self.pool: Optional[HostPool] = None
        self.host: Any = None
        mla = bool(storage_config.is_mla_model)
        # MLA: every rank's page is the same, one key; MHA: a rank's heads
        self.rank_part = "" if mla else f"tp{storage_config.tp_rank}.pp{storage_config.pp_rank}"
        self.writer = storage_config.is_storage_writer

    # ---- SGLang hands over its host pool after construction ----

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        super().register_mem_pool_host(mem_pool_host)
        self.host = mem_pool_host
        page = mem_pool_host.get_dummy_flat_data_page()
        self.dtype, self.numel = page.dtype, page.numel()
        self.page_bytes = self.numel * page.element_size()
        self.page_size = mem_pool_host.page_size
        chunk = -(-self.page_bytes // 64) * 64
        size = parse_size(self.settings.get("size", DEFAULT_SIZE))
        c = self.config
        meaning = pool_meaning("sglang", dict(
            model=c.model_name, pool=type(mem_pool_host).__name__,
            layout=getattr(mem_pool_host, "layout", ""), dtype=self.dtype,
            page_tokens=self.page_size, page_bytes=self.page_bytes,
            mla=int(bool(c.is_mla_model)), tp_size=c.tp_size, pp_size=c.pp_size))
        common = dict(meaning=meaning, chunk_size=chunk, keeper=self.settings.get("keeper"))
        try:  # the pool as another engine made it, whatever size it was given
            self.pool = HostPool.open(self.settings["pool"], existing=True, **common)
        except SharedSegmentError as e:
            if e.errno != errno.ENOENT:
                raise
            self.pool = HostPool.open(self.settings["pool"], chunks=max(1, size // chunk),
                                      pages=self.settings.get("pages", "auto"), **common)
        info = self.pool.info()
        _log.info("sharedseg: SGLang's storage tier is host pool '%s' (%d chunks of %d bytes, "
                  "%s pages%s)", info["name"], info["chunks"], info["chunk_size"], info["pages"],
                  ", kept" if info["kept"] else "")

    def _keys(self, keys: List[str]) -> bytes:
        return b"".join(pool_key(f"{k}|{self.rank_part}") for k in keys)

    def _page(self, chunk: int) -> torch.Tensor:
        return torch.frombuffer(self.pool.chunk(chunk), dtype=self.dtype, count=self.numel)

    # ---- what SGLang calls (interface_v1: pages by their host indices) ----

    def batch_exists(self, keys: List[str], extra_info: Any = None) -> int:
        return self.pool.contains(self._keys(keys), prefix=True) if keys else 0

    def exists(self, key: str) -> bool:
        return self.pool.contains(self._keys([key])) == 1

    def batch_get_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Any = None) -> List[bool]:
        chunks = self.pool.get(self._keys(keys)) if keys else []
        try:
            for i, chunk in enumerate(chunks):
                if chunk is not None:
                    self.host.set_from_flat_data_page(int(host_indices[i * self.page_size]),
                                                      self._page(chunk))
        finally:
            self.pool.unpin([c for c in chunks if c is not None])
        return [c is not None for c in chunks]

    def batch_set_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Any = None) -> List[bool]:
        if not self.writer or not keys:  # MLA: SGLang's first rank writes for all
            return [True] * len(keys)
        try:
            chunks = self.pool.reserve(self._keys(keys))
        except SharedSegmentError as e:
            if e.errno != errno.ENOSPC:
                raise
            return [False] * len(keys)  # every chunk pinned or being filled: none stored
        try:
            for i, chunk in enumerate(chunks):
                if chunk is not None:
                    self._page(chunk).copy_(self.host.get_data_page(
                        int(host_indices[i * self.page_size]), flat=True))
        except BaseException:
            self.pool.abandon(chunks)
            raise
        self.pool.publish(chunks)
        return [True] * len(keys)  # stored now, or by another already

    # ---- SGLang's older calls: whole pages as tensors ----

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None):
        return self.batch_get([key], [target_location])[0]

    def batch_get(self, keys: List[str], target_locations: Any = None,
                  target_sizes: Any = None) -> List[Optional[torch.Tensor]]:
        chunks = self.pool.get(self._keys(keys)) if keys else []
        out: List[Optional[torch.Tensor]] = []
        try:
            for i, chunk in enumerate(chunks):
                if chunk is None:
                    out.append(None)
                    continue
                dst = target_locations[i] if target_locations is not None else None
                page = self._page(chunk)
                out.append(dst.copy_(page) if dst is not None else page.clone())
        finally:
            self.pool.unpin([c for c in chunks if c is not None])
        return out

    def set(self, key: str, value: Any = None, target_location: Any = None,
            target_sizes: Any = None) -> bool:
        return self.batch_set([key], [value])

    def batch_set(self, keys: List[str], values: Any = None, target_locations: Any = None,
                  target_sizes: Any = None) -> bool:
        if not self.writer or not keys:
            return True
        try:
            chunks = self.pool.reserve(self._keys(keys))
        except SharedSegmentError as e:
            if e.errno != errno.ENOSPC:
                raise
            return False
        for chunk, value in zip(chunks, values):
            if chunk is not None:
                self._page(chunk).copy_(value.reshape(-1))
        self.pool.publish(chunks)
        return True

    def clear(self) -> None:
        """SGLang's "flush the storage": this engine's handle forgets nothing
        others stored; a pool is shared, and cleared by no one engine."""

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def get_stats(self):
        """None: SGLang's storage metrics then count on their own (they take
        a StorageMetrics or None); the pool's own counters are in `sharedseg
        ls` and HostPool.info()."""
        return None
