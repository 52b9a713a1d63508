"""A TCP relay on 127.0.0.1 in front of a gateway, whose connections a test can
cut: what a page sees when the network or the server drops its socket. Both
sides are closed at once, so the gateway sees its client vanish too."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

ACCEPT_POLL_S = 0.2
CHUNK_BYTES = 65536


class DroppingProxy:
    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(ACCEPT_POLL_S)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.pairs: list[tuple[socket.socket, socket.socket]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.drops = 0

    def start(self) -> None:
        self._spawn(self._accept_loop)

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self.threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:  # the listener was closed
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            upstream.settimeout(None)
            with self.lock:
                self.pairs.append((client, upstream))
            self._spawn(self._pump, client, upstream)
            self._spawn(self._pump, upstream, client)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(CHUNK_BYTES):
                sink.sendall(data)
        except OSError:  # the other direction, or drop_all, closed a socket
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def drop_all(self) -> int:
        """Cut every open connection, both ways, without a WebSocket close; returns how many."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)  # wakes the pump blocked in recv on it
                sock.close()
        self.drops += len(pairs)
        return len(pairs)

    def close(self) -> None:
        self.stopping.set()
        self.listener.close()
        self.drop_all()
        for thread in self.threads:
            thread.join(timeout=5)


@contextlib.contextmanager
def dropping_proxy(upstream_port: int) -> Iterator[DroppingProxy]:
    proxy = DroppingProxy(upstream_port)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.close()
