# SPDX-License-Identifier: Apache-2.0
"""create_shared_segment(keeper=...): a second group of the same
declaration maps what the first wrote, through `sharedseg keep` (the C
tool); another size gets new memory."""
import os
import signal
import uuid

import pytest

import sharedseg
from conftest import start_keeper


def one_group(name, keeper_name, size, write):
    seg = sharedseg.create_shared_segment(name, world_size=1, size=size, pages="base",
                                          keeper=keeper_name)
    try:
        kept = seg.info["kept"]
        data = seg.buffer()
        first = bytes(data[:4])
        if write:
            data[:4] = bytes([1, 2, 3, 4])
        del data
        return kept, first
    finally:
        seg.close()


def test_a_kept_segment_outlives_its_group():
    k = f"py-{os.getpid()}"
    name = f"pykeep-{uuid.uuid4().hex[:8]}"
    p = start_keeper(k)
    try:
        assert one_group(name, k, 4 << 20, True) == (False, b"\0\0\0\0")
        assert one_group(name, k, 4 << 20, False) == (True, b"\1\2\3\4")
        assert one_group(name, k, 8 << 20, False) == (False, b"\0\0\0\0")
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    assert p.returncode == 0
    assert "freed: size: kept 4 MiB, declared now 8 MiB" in err


def test_keeper_must_be_text():
    with pytest.raises(TypeError, match="keeper must be a str"):
        sharedseg.create_shared_segment("x", world_size=1, size=4096, keeper=3)
