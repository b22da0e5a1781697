# SPDX-License-Identifier: Apache-2.0
"""The dtypes KV caches use: bfloat16, the 8-bit floats (float8_e4m3fn,
float8_e5m2, where torch has them; raw uint8 otherwise), their numpy views
through ml_dtypes where it is installed, and the short spellings."""
import importlib.util

import numpy as np
import pytest
import torch

from conftest import LEG, torch_version
from sharedseg import create_shared_segment

HAS_ML_DTYPES = importlib.util.find_spec("ml_dtypes") is not None
TORCH_FP8 = hasattr(torch, "float8_e4m3fn")


def test_the_legs_have_what_they_test():
    # The PyPI leg promises ml_dtypes and a torch with float8; Debian's has neither.
    if LEG == "pypi":
        assert HAS_ML_DTYPES and TORCH_FP8 and torch_version() >= (2, 1)
    else:
        assert not TORCH_FP8 and torch_version() < (2, 0)


@pytest.mark.parametrize("spelling,canonical", [
    ("float8_e4m3fn", "float8_e4m3fn"), ("fp8", "float8_e4m3fn"), ("fp8_e4m3", "float8_e4m3fn"),
    ("e5m2", "float8_e5m2"), ("fp8_e5m2", "float8_e5m2"), ("f32", "float32"),
    ("f16", "float16"), ("bf16", "bfloat16"), ("F32", "float32"), ("i64", "int64"),
    ("u8", "uint8")])
def test_spellings(spelling, canonical):
    with create_shared_segment("py-dtype-spell", {"x": (1, (4,), spelling)}, pages="base") as seg:
        assert seg.blocks["x"]["dtype"] == canonical
        assert f"shape={canonical}[4]" in seg.describe()


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_blocks(name):
    blocks = {"kv": dict(count=3, shape=(16, 576), dtype=name)}
    with create_shared_segment("py-fp8", blocks, pages="base") as seg:
        kv = seg.tensors("kv")
        assert len(kv) == 3 and kv[0].shape == (16, 576) and kv[0].element_size() == 1
        if TORCH_FP8:
            assert kv[0].dtype == getattr(torch, name)
            kv[1].copy_(torch.full((16, 576), 1.5).to(getattr(torch, name)))
            assert float(kv[1].float().mean()) == 1.5
        else:
            assert kv[0].dtype == torch.uint8  # raw bytes where torch has no float8
            kv[1].fill_(0x3c)
        raw = seg.arrays("kv", dtype=np.uint8)[1]
        assert raw.shape == (16, 576) and len(set(raw.ravel().tolist())) == 1
        arrays = seg.arrays("kv")
        if HAS_ML_DTYPES:
            import ml_dtypes
            assert arrays[1].dtype == np.dtype(getattr(ml_dtypes, name))
            if TORCH_FP8:
                assert float(arrays[1].astype(np.float32).mean()) == 1.5
        else:
            assert arrays[1].dtype == np.uint8
        del kv, raw, arrays


def test_bfloat16_arrays():
    with create_shared_segment("py-bf16", {"k": (2, (8, 8), torch.bfloat16)}, pages="base") as seg:
        k = seg.tensors("k")
        k[1].fill_(1.5)
        if HAS_ML_DTYPES:
            import ml_dtypes
            a = seg.arrays("k")[1]
            assert a.dtype == np.dtype(ml_dtypes.bfloat16) and float(a.astype(np.float32)[3, 3]) == 1.5
            del a
        else:
            with pytest.raises(TypeError, match="install ml_dtypes"):
                seg.arrays("k")
        bits = seg.arrays("k", dtype=np.uint16)[1]
        assert (bits == torch.tensor(1.5, dtype=torch.bfloat16).view(torch.int16).item()).all()
        del k, bits


def test_an_fp8_dtype_object_is_accepted_where_torch_has_it():
    if not TORCH_FP8:
        with pytest.raises(AttributeError):
            getattr(torch, "float8_e4m3fn")
        return
    with create_shared_segment("py-fp8-obj", {"x": (1, (4,), torch.float8_e5m2)},
                               pages="base") as seg:
        assert seg.blocks["x"]["dtype"] == "float8_e5m2"


@pytest.mark.parametrize("dtype", [np.dtype(">f4"), np.dtype(">i8"), np.dtype(">f2")])
def test_a_non_native_byte_order_is_refused_not_taken_for_native(dtype):
    native = dtype.newbyteorder("=")
    with pytest.raises(TypeError, match=f"non-native byte order: a block holds native values; "
                                        f"declare '{native.str}'"):
        create_shared_segment("bo", blocks={"x": dict(count=1, shape=(4,), dtype=dtype)})
    # The native spelling of the same type is accepted, explicit or not.
    for ok in (native, np.dtype("=" + dtype.str[1:]), native.newbyteorder("<")):
        with create_shared_segment("bo", blocks={"x": dict(count=1, shape=(4,), dtype=ok)}) as s:
            assert s.blocks["x"]["dtype"] == native.name
