# SPDX-License-Identifier: Apache-2.0
"""The public API documents itself: every public callable of
sharedseg.__all__ and of SharedSegment has a docstring that names each of
its parameters, and each parameter has a type annotation; list_segments()
names every key its records have."""
import inspect
import re
import subprocess
import sys

import pytest

import sharedseg
from conftest import env_with_package


def public_callables():
    found = []
    for name in sharedseg.__all__:
        obj = getattr(sharedseg, name)
        if inspect.isclass(obj) or callable(obj):
            found.append((name, obj))
    for name, member in vars(sharedseg.SharedSegment).items():
        if name.startswith("_") and name != "__init__":
            continue
        target = member.fget if isinstance(member, property) else member
        if callable(target):
            found.append((f"SharedSegment.{name}", target))
    return found


def parameters(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a C type without a signature
        return []
    return [p for p in sig.parameters.values() if p.name != "self" and
            p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def mentions(doc, name):
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", doc) is not None


@pytest.mark.parametrize("name,obj", public_callables(), ids=lambda v: v if isinstance(v, str)
                         else "")
def test_every_public_callable_documents_and_annotates_its_parameters(name, obj):
    if name == "SharedSegment.__init__":
        # Made by create_shared_segment, never by the caller: annotated only.
        doc = None
    else:
        doc = inspect.getdoc(obj)
        assert doc and doc.strip(), f"{name} has no docstring"
    if inspect.isclass(obj):
        return  # the class's own parameters are its __init__'s
    for p in parameters(obj):
        assert p.annotation is not inspect.Parameter.empty, \
            f"{name}: parameter {p.name} has no type annotation"
        if doc is not None:
            assert mentions(doc, p.name), f"{name}: the docstring does not mention {p.name}"


LISTING = r"""
import json, sharedseg
seg = sharedseg.create_shared_segment("py-api-docs", size=4096, pages="base")
rows = [r for r in sharedseg.list_segments() if r["name"] == "py-api-docs"]
print(json.dumps(rows))
seg.close()
"""


def test_list_segments_names_every_key_it_returns():
    # A fresh process: its segment is the only one of that name.
    run = subprocess.run([sys.executable, "-c", LISTING], capture_output=True, text=True,
                         timeout=60, env=env_with_package())
    assert run.returncode == 0, run.stderr
    import json
    rows = json.loads(run.stdout)
    assert len(rows) == 1, rows
    record = rows[0]
    doc = inspect.getdoc(sharedseg.list_segments)
    keys = set(record)
    for proc in record.get("processes") or []:
        keys |= set(proc)
    missing = sorted(k for k in keys if not mentions(doc, k))
    assert not missing, f"list_segments' docstring does not name {missing}"
