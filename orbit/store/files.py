"""Crash-safe file primitives: atomic replace, whole-line JSONL appends, tolerant reads.

Every mutable file is written to a temporary file in the same folder and renamed over the old
one, so a reader sees either the old or the new content, never a mix. JSON Lines files are only
ever appended, one whole line per `os.write`, so concurrent writers cannot interleave halves.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from orbit.errors import CorruptError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, BinaryIO

_umask: int | None = None


def set_umask(mask: int) -> None:
    """Set the process's umask (inherited by the shepherds it starts) and remember it."""
    global _umask
    os.umask(mask)
    _umask = mask


def current_umask() -> int:
    """The umask, read without changing it (os.umask would, briefly, for every thread)."""
    if _umask is None:
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
        except (OSError, ValueError):
            pass
        return 0o077
    return _umask


def _temp_beside(path: Path) -> tuple[int, str]:
    """A new private file `.<name>.<random>.tmp` beside `path`, open for writing (tempfile's
    mkstemp, without the import of tempfile, shutil and random it costs every process)."""
    while True:
        tmp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), tmp
        except FileExistsError:
            continue


def atomic_write(path: Path, data: bytes, *, durable: bool = True, mode: int | None = None) -> None:
    """Replace `path` with `data`; with `durable`, the bytes reach the disk before the rename.

    The file gets `mode`, or by default what a new file gets under the umask (0600 in a
    private home)."""
    fd, tmp = _temp_beside(path)
    try:
        os.fchmod(fd, 0o666 & ~current_umask() if mode is None else mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


# Plain scalars that YAML 1.1 (PyYAML) reads as strings but YAML 1.2 readers (yq, Go) may not.
_AMBIGUOUS = re.compile(
    r"^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$|^0[xo][0-9a-fA-F]+$"
    r"|^[-+]?\.?(inf|Inf|INF|nan|NaN|NAN)$|^(y|Y|n|N|yes|no|on|off|true|false|null|~)$",
    re.IGNORECASE,
)
_dumper: Any = None


def _yaml_dumper() -> Any:
    global _dumper
    if _dumper is None:
        import yaml

        base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

        class Dumper(base):  # type: ignore[misc, valid-type]
            pass

        def text(dumper: Any, value: str) -> Any:
            style = '"' if _AMBIGUOUS.match(value) else None
            if "\n" in value:
                style = "|"
            return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

        Dumper.add_representer(str, text)
        _dumper = Dumper
    return _dumper


def dump_yaml(data: dict[str, Any]) -> str:
    import yaml

    return yaml.dump(data, Dumper=_yaml_dumper(), sort_keys=False, allow_unicode=True, width=100)


# A plain scalar PyYAML writes as it is (no quotes, no escapes, never folded at `width`), or
# quotes by a rule `_simple_text` repeats: ASCII letters, digits and `_./=+-`, not too long,
# not starting with a character that can open an indicator.
_SIMPLE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./=+-]{0,63}")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_resolver: Any = None


def _simple_text(value: Any) -> str | None:
    """`value`'s text as `dump_yaml` writes it, for None, booleans, integers and the strings of
    `_SIMPLE`; None for anything else. A string our representer finds ambiguous is double
    quoted; one that YAML would read as another type (a date, a number) single quoted."""
    global _resolver
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int:
        return str(value)
    if type(value) is not str or not _SIMPLE.fullmatch(value):
        return None
    if _AMBIGUOUS.match(value):
        return f'"{value}"'
    if _resolver is None:
        import yaml

        _resolver = yaml.resolver.Resolver()
        _resolver.tag = yaml.ScalarNode
    if _resolver.resolve(_resolver.tag, value, (True, False)) != "tag:yaml.org,2002:str":
        return f"'{value}'"
    return value


def _simple_part(key: str, value: Any) -> str | None:
    """`dump_yaml({key: value})` made without PyYAML when `value` is a simple scalar, or an
    empty or flat mapping or list of them; None otherwise (the caller dumps it)."""
    if not _KEY.fullmatch(key) or _simple_text(key) != key:
        return None
    if isinstance(value, dict | list):
        if not value:
            return f"{key}: {'{}' if isinstance(value, dict) else '[]'}\n"
        lines = [f"{key}:"]
        if isinstance(value, dict):
            for k, v in value.items():
                text = _simple_text(v)
                if text is None or type(k) is not str or _simple_text(k) != k:
                    return None
                lines.append(f"  {k}: {text}")
        else:
            for v in value:
                text = _simple_text(v)
                if text is None:
                    return None
                lines.append(f"- {text}")
        return "\n".join(lines) + "\n"
    text = _simple_text(value)
    return None if text is None else f"{key}: {text}\n"


class YamlBatch:
    """`dump_yaml` for many mappings that share most of their values (the runs of a sweep):
    the text of a top-level key is made once and reused while its value stays the same, and
    a key whose value is simple (`_simple_part`) is written without PyYAML.

    The result is byte for byte `dump_yaml`'s. A block mapping's keys are emitted one after
    the other at column 0, so its text is the concatenation of each key's own; the one thing
    that links keys is an anchor (`&id001`) for an object met twice, so a mapping holding one
    is dumped whole.
    """

    def __init__(self) -> None:
        self._parts: dict[str, tuple[str, str]] = {}  # key -> (repr of its value, its text)
        self._varying: set[str] = set()  # keys met with a second value: made every time

    def dump(self, data: dict[str, Any]) -> str:
        if _shared(data, set()):
            return dump_yaml(data)
        out: list[str] = []
        pending: dict[str, Any] = {}  # adjacent keys whose text is made now, in one call
        for key, value in data.items():
            part = None
            if key not in self._varying:
                token = repr(value)
                known = self._parts.get(key)
                if known is None:
                    part = dump_yaml({key: value})
                    self._parts[key] = (token, part)
                elif known[0] == token:
                    part = known[1]
                else:
                    self._varying.add(key)
            if part is None:
                part = _simple_part(key, value)
            if part is None:
                pending[key] = value
                continue
            if pending:
                out.append(dump_yaml(pending))
                pending = {}
            out.append(part)
        if pending:
            out.append(dump_yaml(pending))
        return "".join(out)


def _shared(value: Any, seen: set[int]) -> bool:
    """True when a list or mapping occurs twice in `value` (PyYAML would anchor it)."""
    if isinstance(value, dict | list):
        if id(value) in seen:
            return True
        seen.add(id(value))
        items = value.values() if isinstance(value, dict) else value
        return any(_shared(item, seen) for item in items)
    return False


def write_yaml(path: Path, data: dict[str, Any], *, durable: bool = True) -> None:
    atomic_write(path, dump_yaml(data).encode(), durable=durable)


# A settings or run file (YAML) larger than this is damaged, not slow to read: an 18 MB
# status.yaml took 6 s to parse in `orbit ps -a`.
MAX_YAML_BYTES = 1 << 20


def open_regular(path: Path) -> BinaryIO:
    """`path` open for reading, refused at once unless it is a regular file.

    The open does not block: a FIFO (or a device, or a file on a hung mount that answers
    like one) in a run's place would otherwise hold every reader, and the tick with its
    lock, forever. Raises FileNotFoundError when it is missing, CorruptError ("unreadable
    (not a regular file)") for anything but a file, and OSError for the rest."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CorruptError(f"{path}: unreadable (not a regular file)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file `path` (see `open_regular`); with `limit`, a larger file
    is refused (CorruptError, "unreadable (too large: …)") before it is read."""
    with open_regular(path) as fh:
        if limit is not None:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise CorruptError(
                    f"{path}: unreadable (too large: {size / 1e6:.1f} MB; the limit is "
                    f"{limit / 1e6:.0f} MB)"
                )
        return fh.read()


def read_yaml(path: Path, *, allow_empty: bool = False) -> dict[str, Any]:
    """Read a YAML mapping of at most MAX_YAML_BYTES; a missing, truncated, hand-broken or
    oversized file, or something other than a file, raises CorruptError. With `allow_empty`, a
    file with nothing in it (no bytes, only comments) reads as an empty mapping."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        text = read_regular(path, MAX_YAML_BYTES).decode("utf-8")
    except FileNotFoundError:
        raise CorruptError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorruptError(f"{path}: unreadable ({exc})") from None
    try:
        data = yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        problem = str(exc).splitlines()[0]
        raise CorruptError(f"{path}: not valid YAML ({problem})") from None
    if data is None and allow_empty:
        return {}
    if not isinstance(data, dict):
        raise CorruptError(f"{path}: expected a mapping, found {type(data).__name__}")
    return data


def append_line(path: Path, line: str) -> None:
    """Append one whole line with a single write on an O_APPEND descriptor."""
    data = (line.rstrip("\n") + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def append_lines(path: Path, lines: list[str]) -> None:
    """Append whole lines in one `write` on an O_APPEND descriptor (a second one only if the
    kernel took part of it, e.g. on a full disk: readers skip a torn line)."""
    if not lines:
        return
    data = memoryview("".join(line.rstrip("\n") + "\n" for line in lines).encode())
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def append_jsonl(path: Path, obj: dict[str, Any]) -> None:
    append_line(path, json.dumps(obj, ensure_ascii=False, separators=(",", ":")))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every well-formed JSON object line of `path`; malformed or partial lines are skipped."""
    try:
        raw = read_regular(path)
    except (FileNotFoundError, CorruptError):  # missing, or not a file: no lines
        return []
    out = []
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def touch_exclusive(path: Path | str) -> bool:
    """Create an empty file; False when it already exists."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except FileExistsError:
        return False
    return True


def unlink_quiet(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
