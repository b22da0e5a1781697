"""Block dtypes: torch dtypes, numpy dtypes or their names, reduced to one
canonical name. Neither torch nor numpy is imported here unless the caller
already handed us one of their objects."""
import sys

ITEMSIZE = {
    "bool": 1, "uint8": 1, "int8": 1,
    "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2,
    "int32": 4, "uint32": 4, "float32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "complex64": 8,
    "complex128": 16,
}

_ALIASES = {
    "half": "float16", "fp16": "float16", "bf16": "bfloat16",
    "float": "float32", "fp32": "float32", "double": "float64", "fp64": "float64",
    "byte": "uint8", "char": "int8", "short": "int16", "int": "int32", "long": "int64",
    "cfloat": "complex64", "cdouble": "complex128",
}


def dtype_name(dtype):
    """The canonical name of a torch dtype, numpy dtype or dtype name."""
    if isinstance(dtype, str):
        text = dtype.strip().lower()
    elif type(dtype).__module__ == "torch":
        text = str(dtype)  # "torch.bfloat16"
    elif "numpy" in sys.modules:
        import numpy
        try:
            text = numpy.dtype(dtype).name
        except TypeError:
            text = None
    else:
        text = None
    if text is None:
        raise TypeError(f"dtype {dtype!r} is not a torch dtype, a numpy dtype or a dtype name")
    for prefix in ("torch.", "numpy.", "np."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    text = _ALIASES.get(text, text)
    if text not in ITEMSIZE:
        raise TypeError(f"dtype {dtype!r} is not one of {', '.join(ITEMSIZE)}")
    return text


def torch_dtype(name):
    import torch
    found = getattr(torch, name, None)
    if not isinstance(found, torch.dtype):
        raise TypeError(f"this torch ({torch.__version__}) has no dtype {name}")
    return found


def numpy_dtype(name, block):
    import numpy
    if name == "bfloat16":
        raise TypeError(
            f"block '{block}' holds bfloat16, which numpy has no type for: use "
            f"tensors('{block}'), or arrays('{block}', dtype=numpy.uint16) for the raw bits")
    return numpy.dtype(name)
