# SPDX-License-Identifier: Apache-2.0
"""The extension is built on CPython's limited API (3.11) where the
interpreter has it: one abi3 file for 3.11 and later, whose types are heap
types made from specs (a static PyTypeObject is not in the stable ABI)."""
import sys

import pytest

from sharedseg import _native

HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the limited API's buffer protocol is 3.11's")
def test_the_extension_is_one_abi3_file():
    assert _native.__file__.endswith(".abi3.so"), _native.__file__


def test_the_types_are_heap_types_that_python_cannot_instantiate():
    for t in (_native.Layout, _native.Segment, _native.Pin):
        assert t.__flags__ & HEAPTYPE, t
        assert t.__module__ == "sharedseg._native"
    for t in (_native.Segment, _native.Pin):
        with pytest.raises(TypeError):
            t()

