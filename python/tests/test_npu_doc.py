# SPDX-License-Identifier: Apache-2.0
"""docs/ascend.md's two lines for an NPU machine: the environment they
source is the one tests/npu/run.sh asks for, the defaults they name are the
script's, and the command runs as written (through the fake ACL runtime,
with the build's binaries and a small segment, as test_npu_check runs it)."""
import json
import os
import re
import subprocess

from conftest import ROOT, built, doc_block, env_with_package


def test_the_npu_lines_run_as_written(tmp_path):
    source, command = doc_block("python/tests/test_npu_doc.py", "docs/ascend.md").splitlines()
    script = open(os.path.join(ROOT, "tests/npu/run.sh"), encoding="utf-8").read()
    assert source.startswith("source ") and f"({source})" in script, source
    run, comment = command.split("#", 1)
    defaults = re.findall(r"(SSEG_\w+)=(\S+)", comment)
    assert defaults and comment.strip().endswith("by default"), comment
    for name, value in defaults:
        assert f"${{{name}:-{value}}}" in script, f"run.sh's default for {name} is not {value}"
    words = run.split()
    assert len(words) == 2 and words[0].startswith("OUT="), run
    build = os.path.dirname(built("sharedseg", "the CLI"))
    env = env_with_package(OUT=str(tmp_path), SSEG_NPU_BUILD=build,
                           SHAREDSEG_ACL_LIBRARY=built("libsseg_fake_acl.so", "the fake ACL runtime"),
                           SSEG_FAKE_ACL="devices=2;fabric=1", ASCEND_TOOLKIT_HOME="/nonexistent",
                           SSEG_NPU_SIZE="8MiB", SSEG_NPU_REPS="1", SSEG_NPU_STEP_S="60",
                           SSEG_NPU_BUDGET="120")
    done = subprocess.run(words[1:], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = (tmp_path / "npu.jsonl").read_text().splitlines()
    summary = json.loads(lines[-1])
    assert summary["check"] == "summary" and summary["failed"] == 0, summary
    assert summary["fake_runtime"] is True, summary
