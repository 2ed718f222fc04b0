"""The container's /workspace, as the tar stream Docker's put_archive extracts at `/`.

A snapshot is either a manifest (`snapshots/<hash>.manifest`, see snapstore.py), streamed as
a tar made on the fly from its packs, or a tar an older Orbit wrote whole
(`snapshots/<hash>.tar`), sent as it is. Every entry belongs to the given uid/gid; directories
are 0755, files 0644 or 0755, as the old tar had them.
"""

from __future__ import annotations

import contextlib
import hashlib
import queue
import tarfile
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from orbit.errors import CorruptError
from orbit.execute.snapstore import Entry, manifest_path, pack_path, read_manifest
from orbit.store.home import Home

CHUNK = 1 << 20  # bytes handed to Docker at a time
_ZEROS = bytes(1024)


@dataclass
class Source:
    """Where a snapshot's files come from: a whole tar, or a manifest's entries."""

    snapshot: str
    tar: Path | None = None
    snapshots_dir: Path | None = None
    entries: list[Entry] | None = None

    def stream(self, uid: int, gid: int) -> Generator[bytes, None, None]:
        """The tar, in chunks; close it if not read to the end (its maker thread then ends)."""
        if self.tar is not None:
            return _file_chunks(self.tar)
        assert self.snapshots_dir is not None and self.entries is not None
        return _ahead(_tar_stream(self.snapshot, self.snapshots_dir, self.entries, uid, gid))


def find(home: Home, snapshot: str) -> Source:
    """The snapshot's source; CorruptError when it is gone or its manifest is damaged."""
    path = manifest_path(home.snapshots_dir, snapshot)
    try:
        return Source(
            snapshot, None, home.snapshots_dir, read_manifest(home.snapshots_dir, snapshot)[0]
        )
    except FileNotFoundError:
        pass
    tar = home.snapshot_path(snapshot)
    if not tar.is_file():
        raise CorruptError(f"the code snapshot {snapshot} is gone ({path})")
    return Source(snapshot, tar)


def _ahead(chunks: Iterator[bytes], depth: int = 4) -> Generator[bytes, None, None]:
    """`chunks`, made by a thread up to `depth` chunks ahead, so that making the tar overlaps
    with Docker reading it. The maker's error is raised here; closing this generator stops
    the maker."""
    made: queue.Queue[tuple[bytes | None, BaseException | None]] = queue.Queue(depth)
    stop = threading.Event()

    def put(item: tuple[bytes | None, BaseException | None]) -> bool:
        while not stop.is_set():
            try:
                made.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def make() -> None:
        try:
            for chunk in chunks:
                if not put((chunk, None)):
                    return
            put((None, None))
        except BaseException as exc:  # handed to the reader, which raises it
            put((None, exc))
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()  # its open packs

    maker = threading.Thread(target=make, name="orbit-workspace-tar", daemon=True)
    maker.start()
    try:
        while True:
            chunk, error = made.get()
            if error is not None:
                raise error
            if chunk is None:
                return
            yield chunk
    finally:
        stop.set()
        maker.join()


def _file_chunks(path: Path) -> Generator[bytes, None, None]:
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            yield chunk


def _tar_stream(
    snapshot: str, snapshots_dir: Path, entries: list[Entry], uid: int, gid: int
) -> Iterator[bytes]:
    """The tar of `workspace/…`, in chunks of about CHUNK bytes. A content that is missing or
    does not hash to its SHA-256 raises CorruptError (the copy, and so the run, fails)."""
    parts: list[bytes] = []
    size = 0
    made: set[str] = set()
    with contextlib.ExitStack() as stack:
        packs: dict[str, BinaryIO] = {}

        def content(e: Entry) -> bytes:
            fh = packs.get(e.pack)
            if fh is None:
                path = pack_path(snapshots_dir, e.pack)
                try:
                    fh = packs[e.pack] = stack.enter_context(open(path, "rb"))
                except FileNotFoundError:
                    raise CorruptError(
                        f"the code snapshot {snapshot} is incomplete: {path} is gone"
                    ) from None
            fh.seek(e.offset)
            data = fh.read(e.size)
            if hashlib.sha256(data).hexdigest() != e.ref:
                raise CorruptError(f"the code snapshot {snapshot} is damaged: {e.path} differs")
            return data

        for e in entries:
            arcname = f"workspace/{e.path}"
            for folder in _new_dirs(arcname.rpartition("/")[0], made):
                parts.append(_header(folder, tarfile.DIRTYPE, 0o755, uid, gid, 0, 0))
                size += 512
            if e.kind == "l":
                parts.append(_header(arcname, tarfile.SYMTYPE, 0o644, uid, gid, 0, e.mtime, e.ref))
                size += 512
            else:
                data = content(e)
                mode = 0o755 if e.kind == "x" else 0o644
                parts.append(_header(arcname, tarfile.REGTYPE, mode, uid, gid, len(data), e.mtime))
                parts.append(data)
                pad = -len(data) % 512
                if pad:
                    parts.append(_ZEROS[:pad])
                size += 512 + len(data) + pad
            if size >= CHUNK:
                yield b"".join(parts)
                parts, size = [], 0
    if not made:  # an empty snapshot still makes /workspace
        parts.append(_header("workspace", tarfile.DIRTYPE, 0o755, uid, gid, 0, 0))
    parts.append(_ZEROS)  # the end-of-archive marker
    yield b"".join(parts)


def _new_dirs(folder: str, made: set[str]) -> list[str]:
    """`folder` and its parents not yet in the archive, outermost first."""
    todo = []
    while folder and folder not in made:
        made.add(folder)
        todo.append(folder)
        folder = folder.rpartition("/")[0]
    return todo[::-1]


def _header(
    name: str, kind: bytes, mode: int, uid: int, gid: int, size: int, mtime: int, link: str = ""
) -> bytes:
    """A tar header as tarfile's PAX format writes it: plain ustar when every field fits,
    else tarfile itself adds the extended header."""
    if kind == tarfile.DIRTYPE:
        name += "/"
    if (
        len(name) <= 100
        and len(link) <= 100
        and name.isascii()
        and link.isascii()
        and 0 <= uid < 0o7777777
        and 0 <= gid < 0o7777777
        and 0 <= mtime < 0o77777777777
        and size < 0o77777777777
    ):
        block = b"".join(
            (
                name.encode().ljust(100, b"\0"),
                b"%07o\0%07o\0%07o\0%011o\0%011o\0" % (mode, uid, gid, size, mtime),
                b"        ",  # the checksum, counted as spaces
                kind,
                link.encode().ljust(100, b"\0"),
                b"ustar\x0000",
                bytes(64),  # uname, gname
                bytes(183),  # devmajor, devminor, prefix, padding
            )
        )
        check = b"%06o\0 " % sum(block)
        return block[:148] + check + block[156:]
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.uid, info.gid = kind, mode, uid, gid
    info.size, info.mtime, info.linkname = size, mtime, link
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
