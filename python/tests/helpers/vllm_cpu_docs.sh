#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# docs/integrations.md's blocks for vLLM's CPU backend, run as written
# (tests/readme.py holds each block to lines of this file): the server's
# command, in the background here, then the requests and what shows that
# the second was served from the tier. test_vllm_cpu_docs.py runs it in a
# network namespace of its own, where port 8000 is free, as the leader of
# its process group, with the tiny model it made:
#
#     unshare -n sh vllm_cpu_docs.sh MODEL SERVER_LOG
set -e
ip link set lo up
MODEL=$1
(
VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND='0|1' \
python -m vllm.entrypoints.openai.api_server --model "$MODEL" --port 8000 \
  --tensor-parallel-size 2 --skip-tokenizer-init --max-model-len 512 \
  --kv-transfer-config '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"spec_name":"SharedSegOffloadingSpec","spec_module_path":"sharedseg.vllm","cpu_bytes_to_use":1073741824}}'
) >"$2" 2>&1 &
server=$!
# Until the server answers (or is gone: its log says why).
until curl -sf --max-time 5 localhost:8000/health >/dev/null; do
	kill -0 "$server" 2>/dev/null || { echo "the server exited" >&2; exit 1; }
	sleep 1
done
echo "== ready"
prompt=$(python3 -c 'print(list(range(1, 101)))')
for pass in 1 2; do
  curl -s localhost:8000/v1/completions -H 'Content-Type: application/json' \
    -d "{\"model\":\"$MODEL\",\"prompt\":$prompt,\"max_tokens\":4}"
  echo
done
echo "== metrics"
curl -s localhost:8000/metrics | grep -E '^vllm:external_prefix_cache_hits_total|^vllm:prompt_tokens_cached_by_source_total.*"host"'
# vLLM's log line of the same (every VLLM_LOG_STATS_INTERVAL s: the test's
# 1), 60 s at most
tries=0
until grep -q 'External prefix cache hit rate: [1-9]' "$2"; do
	tries=$((tries + 1))
	[ "$tries" -le 60 ] && kill -0 "$server" 2>/dev/null ||
		{ echo "no hit rate in the server's log" >&2; exit 1; }
	sleep 1
done
echo "== group"
ps -e -o pid=,pgid= | awk -v g=$$ '$2 == g {print $1}'
echo "== ls"
sharedseg ls
echo "== done"
# The server and its workers, every process of this group but this one.
trap '' TERM
kill -TERM -$$
wait
