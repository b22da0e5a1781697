# SPDX-License-Identifier: Apache-2.0
"""The engine adapters: one package per engine (vllm, sglang, lmcache),
each declaring its Engine (its release table and the names its adapters
take from it) in its __init__, over one base (base.py) that holds what
every adapter needs. The adapters import the public API (sharedseg) and
the base, nothing else of the package; nothing outside this package
imports an engine (python/tests/test_structure.py).

Users name the adapters by their documented modules, which re-export
them: sharedseg.vllm, sharedseg.sglang, sharedseg.lmcache,
sharedseg.lmcache_vllm. Importing sharedseg imports none of this.

See docs/integrations.md, "Adding an engine adapter"."""
