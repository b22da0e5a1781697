# SPDX-License-Identifier: Apache-2.0
"""Mooncake Store's master for a test: `mooncake_master` of the engines'
environment (PyPI's mooncake-transfer-engine-non-cuda, which make deps
installs), with its HTTP metadata server, on 127.0.0.1 only, on ports of
its own; stopped at the end.

    with MooncakeMaster() as master:
        master.rpc       "127.0.0.1:PORT", a client's master_server_address
        master.metadata  "http://127.0.0.1:PORT/metadata", its metadata_server

Clients must set MC_TCP_BIND_ADDRESS=127.0.0.1 (else Mooncake's transfer
engine advertises the host's outward address): CLIENT_ENV."""
import os
import socket
import subprocess
import sys
import threading
import time

CLIENT_ENV = {"MC_TCP_BIND_ADDRESS": "127.0.0.1"}
# The master's last word of its start: every server of it listens.
READY = "Task cleanup thread started"


def _free_ports(n):
    """n ports the kernel has free now (bound and let go: another process
    could take one before the master does; the master then fails, said)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class MooncakeMaster:
    """host: the address it serves on; within: a command prefix it runs
    under (["ip", "netns", "exec", NS] for a network namespace whose
    address host is: its ports are then that namespace's, and it is
    awaited by its log alone)."""

    def __init__(self, host="127.0.0.1", within=()):
        rpc, http, admin = _free_ports(3)
        self.rpc = f"{host}:{rpc}"
        self.metadata = f"http://{host}:{http}/metadata"
        binary = os.path.join(os.path.dirname(sys.executable), "mooncake_master")
        assert os.path.exists(binary), f"no {binary}: make deps installs Mooncake"
        self.proc = subprocess.Popen(
            list(within) + [
                binary, f"-rpc_address={host}", f"-rpc_port={rpc}",
                "-enable_http_metadata_server=true", f"-http_metadata_server_host={host}",
                f"-http_metadata_server_port={http}", f"-metrics_host={host}",
                f"-metrics_port={admin}", "-enable_metric_reporting=false"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, MC_TCP_BIND_ADDRESS=host))
        # its log read to the end by a thread (a full pipe would stop it),
        # and its word that it runs awaited
        self.lines, ready = [], threading.Event()

        def drain():
            for line in self.proc.stderr:
                self.lines.append(line)
                if READY in line:
                    ready.set()
            ready.set()  # exited

        threading.Thread(target=drain, daemon=True).start()
        ready.wait(60)
        if self.proc.poll() is not None or not any(READY in x for x in self.lines):
            self.stop()
            raise AssertionError(f"mooncake_master did not start: {''.join(self.lines)[-3000:]}")
        if within:
            return
        # the RPC server's socket, on the kernel's word (bounded)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection((host, rpc), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
