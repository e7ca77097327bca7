"""Running the service until SIGTERM/SIGINT, then stopping in order.

aiohttp's runner does the ordering: close the listening socket (no new connections), close idle
keep-alive connections, wait up to ``shutdown_grace_seconds`` for handlers in flight (a commit being
ratified is answered), then run the cleanup contexts in reverse: the backfiller stops, storage
clients close, the database pool is disposed.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket

from aiohttp import web

from coordinator.runtime.settings import Settings

log = logging.getLogger("commit_owner.serve")


async def _announce_shutdown(app: web.Application) -> None:
    log.info("shutting down: no new connections; finishing the requests in flight")


def root_schemes(settings: Settings) -> set[str]:
    """The storage schemes the service may write to: those of its allowed roots and managed location."""
    from coordinator.security.roots import parse_root, parse_roots

    roots = [*parse_roots(settings.allow_location)]
    if settings.managed_location:
        roots.append(parse_root(settings.managed_location))
    return {r.uri.split("://", 1)[0] for r in roots}


EVENT_LOOPS = ("auto", "uvloop", "asyncio")


def new_event_loop(choice: str) -> asyncio.AbstractEventLoop:
    """The loop `serve` runs on (setting ``event_loop``); uvloop spends less CPU per request (docs/decisions.md).

    Raises ValueError for an unknown choice, or for ``uvloop`` when it is not installed.
    """
    if choice not in EVENT_LOOPS:
        raise ValueError(f"event_loop must be one of {', '.join(EVENT_LOOPS)}, not {choice!r}")
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise ValueError("event_loop = uvloop, but uvloop is not installed (pip install uvloop)") from None
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


Address = tuple[int, int, int, tuple[str, int]]  # family, type, proto, (host, port)


def bind(host: str, port: int, *, listen: bool = True) -> list[socket.socket]:
    """The listening sockets of ``host:port`` (every address the name has, as asyncio binds them), bound
    before anything starts and before "listening" is logged. ``listen=False`` only binds (a probe: is the
    port free, which port did 0 pick).

    Raises OSError with one line naming the address and the reason (e.g. the port is taken).
    """
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise OSError(f"cannot listen on {host}:{port}: unknown host ({e.strerror})") from None
    addresses: list[Address] = list(dict.fromkeys(
        (int(i[0]), int(i[1]), i[2], (str(i[4][0]), int(i[4][1]))) for i in infos))
    try:
        return open_sockets(addresses, reuse_port=False, listen=listen)
    except OSError as e:
        reason = e.strerror.lower() if e.strerror else str(e)
        raise OSError(f"cannot listen on {host}:{port}: {reason}") from None


def addresses_of(socks: list[socket.socket]) -> list[Address]:
    """What ``socks`` are bound to, with the port the kernel picked when 0 was asked."""
    return [(s.family, s.type, s.proto, s.getsockname()[:2]) for s in socks]


def open_sockets(addresses: list[Address], *, reuse_port: bool, listen: bool) -> list[socket.socket]:
    """One socket per address; on any failure the ones opened are closed and the OSError raised.

    ``reuse_port``: SO_REUSEPORT, so that the worker processes of `serve --workers N` each bind the same
    port and the kernel spreads new connections over them (docs/decisions.md).
    """
    socks: list[socket.socket] = []
    try:
        for family, kind, proto, address in addresses:
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp does: restart over TIME_WAIT
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # the IPv4 address binds by itself
            sock.bind(address)
            if listen:
                sock.listen(128)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


def freeze_start_up_heap() -> int:
    """Collect once, then move every object alive after start-up (modules, the app, its pools and clients) to the
    collector's permanent generation; returns how many. Python's cyclic collector then never walks them again:
    its full collections cost what came later (a few ms), not the whole heap (110-150 ms per worker, a stall of
    every request in flight; decision 60). Refcounting still frees them; only cycles among them stay."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def run_service(app: web.Application, settings: Settings, socks: list[socket.socket]) -> None:
    """Serve ``app`` on the bound ``socks`` until a signal; returns after a clean stop."""
    loop = new_event_loop(settings.event_loop)
    where = ", ".join(f"http://[{h}]:{p}" if ":" in h else f"http://{h}:{p}"
                      for h, p in (s.getsockname()[:2] for s in socks))

    async def _announce_listening(app: web.Application) -> None:
        # After the cleanup contexts opened the database and storage: the socket is bound and accepting.
        frozen = freeze_start_up_heap()
        log.info("commit-owner listening on %s (event loop: %s; %d start-up objects frozen out of the garbage "
                 "collector's passes)", where, type(loop).__module__.split(".")[0], frozen)

    app.on_startup.append(_announce_listening)
    app.on_shutdown.append(_announce_shutdown)
    web.run_app(app, sock=socks, print=None, access_log=None, loop=loop,
                shutdown_timeout=settings.shutdown_grace_seconds, handle_signals=True)
    log.info("commit-owner stopped")
