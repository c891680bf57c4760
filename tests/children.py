"""Child processes whose output is read with timeouts.

A bare `proc.stdout.readline()` waits forever for a child that stalls before its
line, and hangs the whole test run. `Child` reads the child's stdout and stderr in
threads of its own, as they come (a progress bar's text is seen before its line
ends), so that every wait of the test has a timeout and a stalled child fails its
test, with what it printed so far.
"""

from __future__ import annotations

import codecs
import os
import queue
import subprocess
import threading
import time

# Long enough for a child that imports TensorFlow on a loaded 2-core machine.
TIMEOUT_S = 300


class Child(subprocess.Popen):
    """A `subprocess.Popen` with stdout piped, and stderr too unless merged into it
    (`stderr=subprocess.STDOUT`) or not piped; stdin, if piped, takes text. Its pipes
    are read by its own threads: read them through `line`, `line_starting`, `until`,
    `rest`, `stderr_text` and `communicate`, never directly."""

    def __init__(self, args, **kwargs):
        kwargs.setdefault("stderr", subprocess.PIPE)
        kwargs["text"] = True
        super().__init__(args, stdout=subprocess.PIPE, **kwargs)
        self._chunks: queue.Queue[str | None] = queue.Queue()
        self._buffer = ""
        self._ended = False
        self._stderr: list[str] = []
        self._readers = [threading.Thread(target=self._read_stdout, daemon=True)]
        if self.stderr is not None:
            self._readers.append(threading.Thread(target=self._read_stderr, daemon=True))
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _chunks_of(stream):
        """The text of `stream` as it comes (os.read: no wait for a full line or buffer)."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        with stream:
            while chunk := os.read(stream.fileno(), 65536):
                yield decoder.decode(chunk)
        yield decoder.decode(b"", final=True)

    def _read_stdout(self) -> None:
        for text in self._chunks_of(self.stdout):
            self._chunks.put(text)
        self._chunks.put(None)

    def _read_stderr(self) -> None:
        for text in self._chunks_of(self.stderr):
            self._stderr.append(text)

    def _wait_for(self, done, timeout: float, what: str) -> None:
        """Reads stdout into the buffer until `done(buffer)` or its end."""
        deadline = time.monotonic() + timeout
        while not done(self._buffer) and not self._ended:
            try:
                text = self._chunks.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"{self.args!r}: no {what} within {timeout:g} s; its output so far: "
                    f"{self._buffer[-3000:]!r}, stderr {self.stderr_text(0)[-3000:]!r}"
                ) from None
            if text is None:
                self._ended = True
            else:
                self._buffer += text

    def _take(self, end: int) -> str:
        taken, self._buffer = self._buffer[:end], self._buffer[end:]
        return taken

    def line(self, timeout: float = TIMEOUT_S) -> str:
        """The next line of its stdout; "" once stdout has ended."""
        self._wait_for(lambda buffer: "\n" in buffer, timeout, "line")
        newline = self._buffer.find("\n")
        return self._take(len(self._buffer) if newline < 0 else newline + 1)

    def line_starting(self, prefix: str, timeout: float = TIMEOUT_S) -> tuple[str, str]:
        """(the first line that starts with `prefix`, the output before it)."""
        deadline = time.monotonic() + timeout
        seen = []
        while line := self.line(deadline - time.monotonic()):
            if line.startswith(prefix):
                return line, "".join(seen)
            seen.append(line)
        raise AssertionError(
            f"{self.args!r} ended without a line starting {prefix!r}: "
            f"{''.join(seen)[-3000:]!r}, stderr {self.stderr_text()[-3000:]!r}"
        )

    def until(self, text: str, timeout: float = TIMEOUT_S) -> str:
        """Its stdout up to the end of the first `text` (AssertionError if it ends first)."""
        self._wait_for(lambda buffer: text in buffer, timeout, repr(text))
        if text not in self._buffer:
            raise AssertionError(
                f"{self.args!r} ended before {text!r}: {self._buffer[-3000:]!r}, "
                f"stderr {self.stderr_text()[-3000:]!r}"
            )
        return self._take(self._buffer.index(text) + len(text))

    def rest(self, timeout: float = TIMEOUT_S) -> str:
        """Its stdout not yet read, once stdout has ended."""
        self._wait_for(lambda buffer: False, timeout, "end of its output")
        return self._take(len(self._buffer))

    def stderr_text(self, timeout: float = 60) -> str:
        """Its stderr: all of it once it has ended within `timeout`, else what came so far.
        (Not `errors`: Popen has an attribute of that name.)"""
        if len(self._readers) > 1:
            self._readers[1].join(timeout)
        return "".join(self._stderr)

    def communicate(self, input=None, timeout: float | None = TIMEOUT_S):  # noqa: A002
        """(stdout not yet read, stderr or None), once it has exited; every wait bounded."""
        if input:
            self.stdin.write(input)
        if self.stdin:
            self.stdin.close()
        timeout = TIMEOUT_S if timeout is None else timeout
        out = self.rest(timeout)
        self.wait(timeout)
        return out, (self.stderr_text(timeout) if self.stderr is not None else None)
