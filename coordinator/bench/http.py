"""The load generator's HTTP/1.1 client: keep-alive connections on asyncio streams, requests written as bytes.

The bench shares the machine with the service it measures, so what the load generator spends per request is
taken from the service. A general client (aiohttp's) spent about 0.7 ms of CPU per request here, more than a
third of a core per 1,000 requests/s; this one builds a request with one bytes join and reads an answer
with two stream reads. It speaks only what the owner answers: ``Content-Length`` bodies, no chunking,
keep-alive unless the server closes.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit


class HttpError(RuntimeError):
    """The connection broke or the server answered something this client does not read."""


class _Conn:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer


class RawHttp:
    """Keep-alive connections to one ``http://host:port``; a request takes an idle one or opens another."""

    def __init__(self, endpoint: str) -> None:
        u = urlsplit(endpoint)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"RawHttp speaks plain http://host:port only, not {endpoint!r}")
        self.host, self.port = u.hostname, u.port or 80
        self._host_header = f"Host: {u.netloc}\r\n".encode()
        self._idle: list[_Conn] = []
        self._all: set[_Conn] = set()

    async def request(self, method: str, target: str, body: bytes = b"",
                      content_type: bytes = b"application/json", headers: bytes = b"") -> tuple[int, bytes]:
        """Send one request (``target``: path and query; ``headers``: more header lines, each ending in CRLF) and
        return (status, body). Raises HttpError."""
        head = [method.encode(), b" ", target.encode(), b" HTTP/1.1\r\n", self._host_header, headers]
        if body or method == "POST":
            head += [b"Content-Type: ", content_type, b"\r\nContent-Length: ", str(len(body)).encode(), b"\r\n"]
        head.append(b"\r\n")
        conn = self._idle.pop() if self._idle else await self._open()
        try:
            conn.writer.write(b"".join(head) + body)
            status, keep, payload = await self._answer(conn.reader)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
            self._drop(conn)
            raise HttpError(f"{method} {target}: {type(e).__name__}: {e}") from e
        if keep:
            self._idle.append(conn)
        else:
            self._drop(conn)
        return status, payload

    async def _open(self) -> _Conn:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        conn = _Conn(reader, writer)
        self._all.add(conn)
        return conn

    @staticmethod
    async def _answer(reader: asyncio.StreamReader) -> tuple[int, bool, bytes]:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length, keep = 0, True
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                keep = False
            elif name == b"transfer-encoding":
                raise ValueError(f"Transfer-Encoding {value.strip()!r} is not read by this client")
        return status, keep, (await reader.readexactly(length) if length else b"")

    def _drop(self, conn: _Conn) -> None:
        self._all.discard(conn)
        conn.writer.close()

    async def close(self) -> None:
        for conn in list(self._all):
            self._drop(conn)
        self._idle.clear()
