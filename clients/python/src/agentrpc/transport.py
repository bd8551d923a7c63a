"""The server subprocess: stdin/stdout frames and a continuously drained stderr.

The transport knows bytes and lines, not JSON-RPC. It exists separately from
:class:`agentrpc.Client` so the protocol logic can later run over another
byte stream (a socket, an in-process pipe) without change.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from .errors import TransportClosed
from .framing import LineFramer, encode_message

__all__ = ["ProcessTransport"]

_stderr_log = logging.getLogger("agentrpc.server")
_log = logging.getLogger("agentrpc.transport")

_READ_CHUNK = 1 << 16
# A single stderr line is truncated beyond this, so a child that prints a
# megabyte without a newline cannot blow up the ring buffer.
_MAX_STDERR_LINE = 8192


class ProcessTransport:
    """A running server process with line-framed stdin/stdout.

    stderr is read from the moment the process starts until it closes, so the
    child never blocks on a full pipe; each line goes to the
    ``agentrpc.server`` logger at DEBUG and into a bounded ring buffer
    (``stderr_tail``) that error messages quote when the server dies.
    """

    def __init__(self, process: asyncio.subprocess.Process, *, stderr_tail_lines: int = 200) -> None:
        self._process = process
        self._write_lock = asyncio.Lock()
        self._stderr_lines: collections.deque[str] = collections.deque(maxlen=max(1, stderr_tail_lines))
        self._stderr_partial = ""
        self._stderr_task: asyncio.Task[None] | None = None
        self._stdin_closed = False
        if process.stderr is not None:
            self._stderr_task = asyncio.create_task(self._drain_stderr(process.stderr), name="agentrpc-stderr")

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr_tail_lines: int = 200,
    ) -> ProcessTransport:
        """Start ``argv`` with all three standard streams piped."""
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
        return cls(process, stderr_tail_lines=stderr_tail_lines)

    # -- process facts -------------------------------------------------------

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """The exit code, or ``None`` while the process runs."""
        return self._process.returncode

    @property
    def stderr_tail(self) -> str:
        """The last lines the server wrote to stderr (bounded), newline-joined."""
        lines = list(self._stderr_lines)
        if self._stderr_partial:
            lines.append(self._stderr_partial)
        return "\n".join(lines)

    # -- writing -------------------------------------------------------------

    async def send(self, message: Any) -> None:
        """Write one message and wait until the pipe accepted it (backpressure)."""
        data = encode_message(message)
        async with self._write_lock:
            stdin = self._writable_stdin()
            try:
                stdin.write(data)
                await stdin.drain()
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise TransportClosed(f"cannot write to the server: {exc}", stderr_tail=self.stderr_tail) from exc

    def send_nowait(self, message: Any) -> bool:
        """Queue one message without waiting; ``False`` if the pipe is gone.

        For paths that must not await, such as sending ``$/cancelRequest``
        from inside a cancelled task. Each write is one whole frame, so it
        cannot interleave with a frame written by :meth:`send`.
        """
        try:
            stdin = self._writable_stdin()
            stdin.write(encode_message(message))
            return True
        except (TransportClosed, BrokenPipeError, ConnectionResetError, RuntimeError):
            return False

    def _writable_stdin(self) -> asyncio.StreamWriter:
        stdin = self._process.stdin
        if stdin is None or self._stdin_closed or stdin.is_closing():
            raise TransportClosed("the server's stdin is closed", stderr_tail=self.stderr_tail)
        return stdin

    async def close_stdin(self, timeout: float = 5.0) -> None:
        """Close stdin: the server treats end of input as the client leaving.

        Unsent bytes get ``timeout`` seconds to drain (a server that stopped
        reading never takes them); then the pipe is aborted.
        """
        if self._stdin_closed:
            return
        self._stdin_closed = True
        stdin = self._process.stdin
        if stdin is None:
            return
        try:
            stdin.close()
            await asyncio.wait_for(stdin.wait_closed(), timeout=timeout)
        except TimeoutError:
            stdin.transport.abort()
        except (BrokenPipeError, ConnectionResetError):
            pass

    # -- reading -------------------------------------------------------------

    async def lines(self) -> AsyncIterator[bytes]:
        """Yield each stdout line until end of stream."""
        stdout = self._process.stdout
        if stdout is None:
            return
        framer = LineFramer()
        while True:
            chunk = await stdout.read(_READ_CHUNK)
            if not chunk:
                break
            for line in framer.feed(chunk):
                yield line
        last = framer.flush()
        if last is not None:
            yield last

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        """Read stderr to its end, logging and keeping the tail."""
        try:
            while True:
                chunk = await stream.read(_READ_CHUNK)
                if not chunk:
                    break
                text = self._stderr_partial + chunk.decode("utf-8", errors="replace")
                *complete, partial = text.split("\n")
                for line in complete:
                    self._add_stderr_line(line)
                if len(partial) > _MAX_STDERR_LINE:
                    self._add_stderr_line(partial[:_MAX_STDERR_LINE] + " …[truncated]")
                    partial = ""
                self._stderr_partial = partial
        except (ConnectionResetError, BrokenPipeError):  # pragma: no cover - platform specific
            pass
        finally:
            if self._stderr_partial:
                self._add_stderr_line(self._stderr_partial)
                self._stderr_partial = ""

    def _add_stderr_line(self, line: str) -> None:
        line = line.rstrip("\r")
        if len(line) > _MAX_STDERR_LINE:
            line = line[:_MAX_STDERR_LINE] + " …[truncated]"
        self._stderr_lines.append(line)
        if _stderr_log.isEnabledFor(logging.DEBUG):
            _stderr_log.debug("%s", line)

    # -- ending --------------------------------------------------------------

    async def wait(self, timeout: float | None) -> int | None:
        """Wait for the process to exit; its code, or ``None`` on timeout."""
        try:
            return await asyncio.wait_for(self._process.wait(), timeout)
        except TimeoutError:
            return None

    async def stop(self, grace: float) -> int | None:
        """Make sure the process is gone: wait, then SIGTERM, then SIGKILL."""
        code = await self.wait(grace)
        if code is not None:
            return code
        for sig in (signal.SIGTERM, signal.SIGKILL):
            _log.debug("server %d did not exit in %.1fs; sending %s", self.pid, grace, sig.name)
            try:
                self._process.send_signal(sig)
            except ProcessLookupError:
                pass
            code = await self.wait(grace)
            if code is not None:
                return code
        return self._process.returncode

    async def finish(self, timeout: float) -> None:
        """Wait (bounded) for stderr to be drained after the process exited."""
        task = self._stderr_task
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            # A grandchild may hold stderr open; stop reading rather than hang.
            task.cancel()
