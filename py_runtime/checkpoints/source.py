"""Where a checkpoint's bytes come from: a ranged source, read a piece at a time.

A source has a `name` (for errors), a `size` in bytes and `await read(offset, length)`, which returns
exactly the bytes [offset, offset + length) or raises. Readers ask for a header, then one tensor (or a
run of its rows) at a time, so the file never has to fit in Python's memory: a file on disk (natively,
or in Pyodide's file system), bytes already in memory, or in the page a File the user picked or a
local URL (ranged fetches), which the browser side provides over the same two members.

`Cursor` parses a header sequentially over a source, refilling a window of it as it goes.
"""

from __future__ import annotations

import os
import struct

__all__ = ["CheckpointError", "FileSource", "BytesSource", "Cursor"]

WINDOW = 1 << 20        # bytes a Cursor reads per refill (headers of large vocabularies are several MB)


class CheckpointError(ValueError):
    """A checkpoint that cannot be read as claimed: the message names the file and, where there is one,
    the tensor."""


class FileSource:
    """A file on disk, opened once, read at offsets."""

    def __init__(self, path, name: str | None = None):
        self.path = os.fspath(path)
        self.name = name or os.path.basename(self.path)
        self._file = open(self.path, "rb")
        self.size = os.fstat(self._file.fileno()).st_size

    async def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise CheckpointError(f"{self.name}: bytes [{offset}, {offset + length}) are past its end "
                                  f"({self.size} bytes): the file is truncated")
        self._file.seek(offset)
        data = self._file.read(length)
        if len(data) != length:
            raise CheckpointError(f"{self.name}: read {len(data)} of {length} bytes at {offset}")
        return data

    def close(self) -> None:
        self._file.close()


class BytesSource:
    """Bytes in memory, as a source (tests, and files small enough to hold)."""

    def __init__(self, data: bytes | bytearray | memoryview, name: str = "<bytes>"):
        self._data = memoryview(data).cast("B")
        self.name = name
        self.size = len(self._data)

    async def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise CheckpointError(f"{self.name}: bytes [{offset}, {offset + length}) are past its end "
                                  f"({self.size} bytes): the file is truncated")
        return bytes(self._data[offset:offset + length])

    def close(self) -> None:
        pass


class Cursor:
    """Sequential little-endian reads from a source starting at `offset`; `await need(n)` before
    taking n bytes with the synchronous readers."""

    def __init__(self, source, offset: int = 0):
        self.source = source
        self._window = b""
        self._start = offset        # file offset of _window[0]
        self._at = 0                # position within _window

    @property
    def offset(self) -> int:
        return self._start + self._at

    async def need(self, n: int, what: str = "the header") -> None:
        if self._at + n <= len(self._window):
            return
        offset = self.offset
        if offset + n > self.source.size:
            raise CheckpointError(f"{self.source.name}: {what} needs bytes [{offset}, {offset + n}) but the file "
                                  f"has {self.source.size}: it is truncated")
        length = min(max(n, WINDOW), self.source.size - offset)
        self._window, self._start, self._at = await self.source.read(offset, length), offset, 0

    def take(self, n: int) -> bytes:
        data = self._window[self._at:self._at + n]
        self._at += n
        return data

    def unpack(self, fmt: str):
        size = struct.calcsize("<" + fmt)
        values = struct.unpack_from("<" + fmt, self._window, self._at)
        self._at += size
        return values

    async def read(self, fmt: str, what: str = "the header"):
        await self.need(struct.calcsize("<" + fmt), what)
        values = self.unpack(fmt)
        return values[0] if len(values) == 1 else values
