# SPDX-License-Identifier: Apache-2.0
"""Block dtypes: torch dtypes, numpy dtypes (ml_dtypes' too) or their names,
reduced to one canonical name. Neither torch nor numpy is imported here
unless the caller already handed us one of their objects."""
import importlib.util
import sys
from typing import Any, Optional

ITEMSIZE = {
    "bool": 1, "uint8": 1, "int8": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
    "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2,
    "int32": 4, "uint32": 4, "float32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "complex64": 8,
    "complex128": 16,
}

# The 8-bit floats: torch (2.1+) and ml_dtypes name them alike; where the
# library in use has no such type, their blocks are viewed as raw uint8,
# as engines that store fp8 KV caches in uint8 tensors do.
FP8 = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")

_ALIASES = {
    "half": "float16", "fp16": "float16", "f16": "float16",
    "bf16": "bfloat16",
    "float": "float32", "fp32": "float32", "f32": "float32",
    "double": "float64", "fp64": "float64", "f64": "float64",
    "byte": "uint8", "u8": "uint8", "char": "int8", "i8": "int8",
    "short": "int16", "i16": "int16", "u16": "uint16",
    "int": "int32", "i32": "int32", "u32": "uint32",
    "long": "int64", "i64": "int64", "u64": "uint64",
    "cfloat": "complex64", "cdouble": "complex128",
    # vLLM's kv_cache_dtype words: "fp8" is e4m3.
    "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2", "e5m2": "float8_e5m2",
}


def dtype_name(dtype: Any) -> str:
    """The canonical name of a torch dtype, numpy dtype or dtype name."""
    if isinstance(dtype, str):
        text: Optional[str] = dtype.strip().lower()
    elif type(dtype).__module__ == "torch":
        text = str(dtype)  # "torch.bfloat16"
    elif "numpy" in sys.modules:
        import numpy
        try:
            found = numpy.dtype(dtype)
        except TypeError:
            found = None
        if found is not None and not found.isnative:
            # numpy names '>f4' float32 too: the segment would hold values
            # its readers take for native ones, and the fingerprint could
            # not tell the two orders apart.
            raise TypeError(f"dtype {found.str!r} has the non-native byte order: a block "
                            f"holds native values; declare {found.newbyteorder('=').str!r} "
                            f"and convert with .astype() when filling it")
        text = None if found is None else found.name
    else:
        text = None
    if text is None:
        raise TypeError(f"dtype {dtype!r} is not a torch dtype, a numpy dtype or a dtype name")
    for prefix in ("torch.", "numpy.", "np."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    text = _ALIASES.get(text, text)
    if text not in ITEMSIZE:
        raise TypeError(f"dtype {dtype!r} is not one of {', '.join(ITEMSIZE)} "
                        f"(or {', '.join(sorted(_ALIASES))})")
    return text


def torch_dtype(name: str) -> Any:
    """The torch dtype of a block; uint8 for an 8-bit float this torch lacks."""
    import torch
    found = getattr(torch, name, None)
    if isinstance(found, torch.dtype):
        return found
    if name in FP8:
        return torch.uint8
    raise TypeError(f"this torch ({torch.__version__}) has no dtype {name}")


def _ml_dtypes() -> Any:
    if "ml_dtypes" in sys.modules or importlib.util.find_spec("ml_dtypes") is not None:
        import ml_dtypes
        return ml_dtypes
    return None


def numpy_dtype(name: str, block: str) -> Any:
    """The numpy dtype of a block: ml_dtypes' bfloat16 and 8-bit floats where
    ml_dtypes is installed; raw uint8 for 8-bit floats without it."""
    import numpy
    if name == "bfloat16" or name in FP8:
        extra = _ml_dtypes()
        if extra is not None and hasattr(extra, name):
            return numpy.dtype(getattr(extra, name))
        if name in FP8:
            return numpy.dtype("uint8")
        raise TypeError(
            f"block '{block}' holds bfloat16, which numpy has no type for: install "
            f"ml_dtypes (pip install ml_dtypes), use tensors('{block}'), or "
            f"arrays('{block}', dtype=numpy.uint16) for the raw bits")
    return numpy.dtype(name)
