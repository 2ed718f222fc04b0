"""An installed skill: a real directory copied from the package, standing alone.

`<skills dir>/<name>/` holds the skill's files and, under `references/docs/`, every `.md` of
Orbit's docs/ (the skill links to them, and they to each other), so nothing it names lives
anywhere else: moving or deleting ORBIT_HOME, or the checkout, leaves it whole. Beside them
`.orbit-skill.json` records what was installed (version, each file's SHA-256) and for whom
(`users`: home and agent, as Codex, pi and dsh share ~/.agents/skills). A copy that differs
from its record was changed by someone else, and Orbit neither replaces nor deletes it.

A copy is built complete in a `.orbit-staging-…` folder beside it (same file system, two
levels down, where no agent looks for skills) and put in place by renames: the old copy is
moved aside, the new one in, the old one deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orbit
from orbit.errors import ConflictError
from orbit.store.files import atomic_write

PACKAGE = Path(orbit.__file__).resolve().parent
MARKER = ".orbit-skill.json"
DOCS = "references/docs"
STAGING = ".orbit-staging-"
STAGING_STALE_S = 600  # a staging folder this old was left by an install that died
# Where skills were linked to before they were copied: ORBIT_HOME/agent-kit/<copy>/skills/<name>.
OLD_LINK = re.compile(r"/agent-kit/[^/]+/skills/(?P<name>[^/]+)/?$")


def package_skills() -> Path:
    return PACKAGE / "skills"


def package_docs() -> Path:
    return PACKAGE / "docs"


def skill_names() -> list[str]:
    return sorted(p.name for p in package_skills().iterdir() if (p / "SKILL.md").is_file())


def _hidden(rel: Path) -> bool:
    return any(p.startswith(".") or p == "__pycache__" for p in rel.parts)


def source_files(name: str) -> dict[str, Path]:
    """What a copy of skill `name` holds: relative path → the package file it comes from.
    The skill's own `references/docs` (a link to docs/ in a checkout) is replaced by the .md
    files of the package's docs/."""
    root = package_skills() / name
    files: dict[str, Path] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.as_posix() == DOCS or rel.as_posix().startswith(DOCS + "/") or _hidden(rel):
            continue
        if path.is_file():
            files[rel.as_posix()] = path
    for path in sorted(package_docs().rglob("*.md")):
        rel = path.relative_to(package_docs())
        if not _hidden(rel):
            files[f"{DOCS}/{rel.as_posix()}"] = path
    return files


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def wanted(name: str) -> dict[str, str]:
    """Relative path → SHA-256 of each file a fresh copy of `name` would hold."""
    return {rel: _sha(src) for rel, src in source_files(name).items()}


def present_files(path: Path) -> dict[str, str]:
    """Relative path → SHA-256 of the files in an installed copy (the marker left out); a link
    or anything else that is not a plain file counts as a file nobody installed."""
    found: dict[str, str] = {}
    for top, dirs, names in os.walk(path):
        base = Path(top)
        for entry in [*names, *[d for d in dirs if (base / d).is_symlink()]]:
            full = base / entry
            rel = full.relative_to(path).as_posix()
            if rel == MARKER:
                continue
            found[rel] = _sha(full) if full.is_file() and not full.is_symlink() else "not a file"
    return found


@dataclass(frozen=True)
class Found:
    """What is at a skill's place: `absent`, `link` (Orbit's older symbolic link into a home's
    agent-kit), `copy` (Orbit's; `changed` names a file that differs from its record, if any)
    or `foreign` (the user's own)."""

    kind: str
    marker: dict[str, Any] | None = None
    changed: str | None = None

    def users(self) -> set[tuple[str, str]]:
        raw = (self.marker or {}).get("users") or []
        return {(str(u["home"]), str(u["agent"])) for u in raw if isinstance(u, dict)}


def read_marker(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and isinstance(data.get("files"), dict)
    return data if ok else None


def inspect(path: Path) -> Found:
    if path.is_symlink():
        return Found("link" if OLD_LINK.search(os.readlink(path)) else "foreign")
    if not path.exists():
        return Found("absent")
    marker = read_marker(path) if path.is_dir() else None
    if marker is None:
        return Found("foreign")
    present = present_files(path)
    recorded = marker["files"]
    changed = next(
        (
            rel
            for rel in sorted(set(present) | set(recorded))
            if present.get(rel) != recorded.get(rel)
        ),
        None,
    )
    return Found("copy", marker, changed)


def refuse(path: Path, name: str, found: Found) -> None:
    """Raise when the place holds what Orbit must not replace: the user's own skill, or
    Orbit's copy changed since it was installed."""
    if found.kind == "foreign":
        raise ConflictError(
            f"{path} exists and is not Orbit's; move it away to install Orbit's {name} skill"
        )
    if found.kind == "copy" and found.changed:
        raise ConflictError(
            f"{path} was changed since Orbit installed it ({found.changed}); move it away to "
            f"install Orbit's {name} skill again"
        )


def _marker_bytes(name: str, files: dict[str, str], users: set[tuple[str, str]]) -> bytes:
    data = {
        "format": 1,
        "skill": name,
        "version": orbit.__version__,
        "files": files,
        "users": [{"home": h, "agent": a} for h, a in sorted(users)],
    }
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def put(path: Path, name: str, users: set[tuple[str, str]]) -> bool:
    """Make `path` Orbit's current copy of skill `name`, used by `users`; whether anything
    was written. The caller has refused what must not be replaced (`refuse`)."""
    found = inspect(path)
    files = source_files(name)
    hashes = {rel: _sha(src) for rel, src in files.items()}
    marker = _marker_bytes(name, hashes, users)
    if found.kind == "copy" and found.marker and found.marker.get("files") == hashes:
        if (path / MARKER).read_bytes() == marker:
            return False
        atomic_write(path / MARKER, marker)
        return True
    _clear_stale_staging(path.parent)
    staging = path.parent / f"{STAGING}{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        build = staging / name
        for rel, src in files.items():
            dest = build / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
        (build / MARKER).write_bytes(marker)
        if found.kind != "absent":
            os.rename(path, staging / "replaced")
        os.rename(build, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return True


def set_users(path: Path, users: set[tuple[str, str]]) -> None:
    """Rewrite the record of who uses the copy (its files stay as they are)."""
    marker = read_marker(path) or {}
    data = _marker_bytes(str(marker.get("skill")), marker.get("files") or {}, users)
    atomic_write(path / MARKER, data)


def take_away(path: Path) -> None:
    """Remove Orbit's copy (or older link) at `path`: moved aside in one rename, then deleted."""
    if path.is_symlink():
        path.unlink()
        return
    aside = path.parent / f"{STAGING}{secrets.token_hex(4)}"
    os.rename(path, aside)
    shutil.rmtree(aside, ignore_errors=True)


def disown(path: Path) -> None:
    """Leave a changed copy to the user: only its record goes."""
    (path / MARKER).unlink(missing_ok=True)


def _clear_stale_staging(folder: Path) -> None:
    """Remove staging folders that an install which died left behind (not a running one's)."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        try:
            old = time.time() - entry.lstat().st_mtime > STAGING_STALE_S
        except OSError:
            continue
        if entry.name.startswith(STAGING) and old and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
