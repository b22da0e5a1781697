# SPDX-License-Identifier: Apache-2.0
"""A plain TCP all-gather for tests that want ranks without torch.distributed
or MPI: rank 0 is the hub, every call is one all-gather of equal-size bytes."""
import socket
import struct
import time


def _recv(sock, n):
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError(f"peer closed with {left} of {n} bytes unread")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class TcpExchange:
    def __init__(self, rank, world_size, port=0, timeout=30.0):
        self.rank, self.world_size, self.timeout = rank, world_size, timeout
        self.peers = None
        if rank == 0:
            self.server = socket.create_server(("127.0.0.1", port))
            self.server.settimeout(timeout)
            self.port = self.server.getsockname()[1]
        else:
            self.port = port
            self.sock = self._connect(port)

    def _connect(self, port):
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=self.timeout)
                sock.sendall(struct.pack("<i", self.rank))
                return sock
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _accept(self):
        self.peers = {}
        for _ in range(self.world_size - 1):
            conn, _ = self.server.accept()
            conn.settimeout(self.timeout)
            self.peers[struct.unpack("<i", _recv(conn, 4))[0]] = conn
        self.server.close()

    def __call__(self, mine):
        n = len(mine)
        if self.rank != 0:
            self.sock.sendall(mine)
            joined = _recv(self.sock, n * self.world_size)
            return [joined[i * n:(i + 1) * n] for i in range(self.world_size)]
        if self.peers is None:
            self._accept()
        items = [bytes(mine)] + [None] * (self.world_size - 1)
        for r, conn in self.peers.items():
            items[r] = _recv(conn, n)
        joined = b"".join(items)
        for conn in self.peers.values():
            conn.sendall(joined)
        return items
