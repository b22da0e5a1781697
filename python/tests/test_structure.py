# SPDX-License-Identifier: Apache-2.0
"""Backends and torch devices are named in python/sharedseg/_backends.py
only, so that a backend added in C needs no Python change: anywhere else a
backend or device name as a string value, or a torch device module looked
up (torch.cuda, torch.npu), fails here with its file and line. Docstrings
and messages may name them: a string is flagged only when its whole value is
the name."""
import ast
import io
import pathlib
import tokenize

import sharedseg

PACKAGE = pathlib.Path(sharedseg.__file__).parent
ONE_MODULE = "_backends.py"
EXEMPT = {ONE_MODULE}
# The torch device types that stand for a backend's devices.
TORCH_DEVICES = {"cuda", "npu", "xpu"}


def backend_names():
    """Every backend the C library has (its probe lists them), and the torch
    devices that go with them."""
    return set(sharedseg.probe()["backends"]) | TORCH_DEVICES


def offences(path, names):
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    found = []
    for i, tok in enumerate(tokens):
        where = f"{path.name}:{tok.start[0]}"
        if tok.type == tokenize.STRING:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, str) and value.lower() in names:
                found.append(f"{where}: the string {tok.string} names a backend")
        elif (tok.type == tokenize.NAME and tok.string == "torch" and i + 2 < len(tokens)
              and tokens[i + 1].string == "." and tokens[i + 2].string in TORCH_DEVICES):
            found.append(f"{where}: torch.{tokens[i + 2].string} looks up a device module")
    return found


def test_backends_are_named_in_one_module():
    names = backend_names()
    assert {"memfd", "cuda", "ascend"} <= names
    found = [o for path in sorted(PACKAGE.glob("*.py")) if path.name not in EXEMPT
             for o in offences(path, names)]
    assert not found, (f"backends are named in {ONE_MODULE} only; route these through it:\n"
                       + "\n".join(found))


def test_the_check_catches_a_named_backend(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('"""Names cuda in prose."""\nB = "cuda"\nd = torch.npu.current_device()\n'
                      'm = f"backend {B}"\n')
    assert offences(sample, backend_names()) == [
        "sample.py:2: the string \"cuda\" names a backend",
        "sample.py:3: torch.npu looks up a device module"]
