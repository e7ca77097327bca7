"""Nudges between the backfillers of one host: a Unix datagram socket per background backfiller (decision 66).

A process refused a table's lease reads who holds it and, when the holder runs on this host (its holder id is
``<hostname>:<pid>:<tag>``), sends it a datagram naming the table: ``ask <table id> <version or all>``. The
holder's backfiller runs the table at once instead of at its next sweep (its mark deferred as usual). An
explicit backfill waiting in the sender sends ``wait <table id> <version or all>`` instead: the holder's run then
also records what it published, and answers ``done <table id> <version>`` (through which it is recorded
published, -1 when it cannot say) to the sender's own socket; the waiting backfill returns, or looks at the table
again.

A nudge only asks: whoever publishes still holds the lease, in the database, and publishes in order. A lost
datagram (a full queue, a holder gone, a holder on another host) costs what the sweep costs, as before.

The sockets live in one folder per user under the temporary directory (``$TMPDIR``, or ``/tmp`` when that is too
deep for a socket's path), mode 0700, so only the same user's processes can nudge; a folder of that name owned by
someone else, or open to others, is not used (the process then runs without nudges). Each socket is named
``<pid>-<tag>`` after its holder id; ``close`` removes it, and the folder once it is empty. A process killed with
SIGKILL leaves its socket file: the next backfiller to open removes those whose process is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import stat
import tempfile
from collections.abc import Callable

log = logging.getLogger("commit_owner.backfill")

#: The longest datagram either side sends or reads (a table id is a UUID).
MAX_DATAGRAM = 256


#: The longest temporary directory the sockets' folder goes in; a deeper one is left for ``/tmp`` (a socket's path
#: has room for 107 bytes on Linux: this, the folder's name and the longest socket name, Linux's largest pid).
MAX_BASE = 107 - len("/commit-owner-4294967295/4194304-ffffffff")


def folder(temporary: str | None = None) -> str:
    """The folder of this user's backfiller sockets: in the temporary directory (``temporary``, by default this
    process's), or in ``/tmp`` when that one is too deep for a socket's path."""
    base = temporary or tempfile.gettempdir()
    return os.path.join(base if len(base) <= MAX_BASE else "/tmp", f"commit-owner-{os.getuid()}")


def address(holder: str) -> str | None:
    """The socket of the backfiller ``holder`` names, when it runs on this host; None otherwise (another host,
    or a holder id of another shape: nothing to nudge)."""
    host, pid, tag = (holder.split(":") + ["", ""])[:3]
    if host != socket.gethostname() or not pid.isdigit() or not tag.isalnum():
        return None
    return os.path.join(folder(), f"{pid}-{tag}")


class Nudges:
    """One backfiller's socket: it hears asks and answers, and sends them. Every method runs on the event loop
    and never raises for a peer that is gone."""

    def __init__(self, sock: socket.socket, path: str, on_ask: Callable[[str, int | None, str | None], None],
                 on_done: Callable[[str, int], None]) -> None:
        self._sock = sock
        self.path = path
        self._on_ask = on_ask
        self._on_done = on_done
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(sock.fileno(), self._read)

    @classmethod
    def open(cls, holder: str, on_ask: Callable[[str, int | None, str | None], None],
             on_done: Callable[[str, int], None]) -> Nudges | None:
        """The socket of ``holder``, bound and read on the running loop. ``on_ask(table id, version or None,
        the sender's address when it waits for an answer)``; ``on_done(table id, version recorded)``. None (with a warning) when it
        cannot be opened: the process then publishes other processes' commits at its sweep."""
        path = address(holder)
        if path is None:
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            for _ in range(3):  # another process may remove the folder, empty, between the two steps
                _own_folder(os.path.dirname(path))
                try:
                    sock.bind(path)
                    break
                except FileNotFoundError:
                    continue
            else:
                raise OSError(errno.ENOENT, "the folder kept disappearing", os.path.dirname(path))
            _remove_stale(os.path.dirname(path))
            return cls(sock, path, on_ask, on_done)
        except OSError as e:
            sock.close()
            log.warning("backfill nudges off in this process (another process's commits wait for its sweep): "
                        "cannot open %s: %s", path, e.strerror or e)
            return None

    def close(self) -> None:
        """Stop hearing; remove the socket file, and the folder when it is left empty."""
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):  # (not empty: another process's socket is there)
            os.rmdir(os.path.dirname(self.path))

    def ask(self, holder: str, table_id: str, up_to: int | None, *, answer: bool) -> bool:
        """Ask the backfiller of ``holder`` to publish ``table_id`` through ``up_to`` (None: all) now; with
        ``answer`` it also records it and says ``done`` to this socket (``on_done``). False when ``holder`` is
        not on this host or the datagram could not be delivered."""
        to = address(holder)
        word = "wait" if answer else "ask"
        return to is not None and self._send(to, f"{word} {table_id} {'all' if up_to is None else up_to}")

    def done(self, to: str, table_id: str, recorded: int) -> None:
        """Tell the backfiller at ``to``, which asked, that ``table_id`` was run for it and is recorded published
        through ``recorded`` (-1: it cannot say)."""
        self._send(to, f"done {table_id} {max(recorded, -1)}")

    def _send(self, to: str, message: str) -> bool:
        try:
            self._sock.sendto(message.encode(), to)
            return True
        except OSError:  # gone (no file, nobody reading it), or its queue is full: the sweep stays the fallback
            return False

    def _read(self) -> None:
        while True:
            try:
                data, sender = self._sock.recvfrom(MAX_DATAGRAM)
            except OSError:  # (BlockingIOError: nothing more to read)
                return
            words = data.decode(errors="replace").split()
            if len(words) < 2 or len(words[1]) > 64:  # (a table id is a UUID; the run reads it as a parameter)
                continue
            if len(words) == 3 and words[0] in ("ask", "wait") and (words[2] == "all" or words[2].isdigit()):
                answer_to = sender if words[0] == "wait" and isinstance(sender, str) and sender else None
                self._on_ask(words[1], None if words[2] == "all" else int(words[2]), answer_to)
            elif len(words) == 3 and words[0] == "done" and words[2].lstrip("-").isdigit():
                self._on_done(words[1], int(words[2]))


def _own_folder(path: str) -> None:
    """Make ``path`` (mode 0700) unless it is there; refuse one that is not this user's own, or is open to others."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise OSError(errno.EPERM, "not a folder of this user's alone", path)


def _remove_stale(path: str) -> None:
    """Remove the sockets in ``path`` whose process is gone (killed without its ``close``)."""
    try:
        names = os.listdir(path)
    except OSError:
        return
    for name in names:
        pid = name.split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(path, name))
        except OSError:
            pass  # alive (another user's pid, say): leave it
