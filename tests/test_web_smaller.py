"""The audit's smaller findings on the web view (web-5f5e1dc.md 5, 6, 7 and 10), each replayed
against a real `orbit web` server: lock files another user could hold, notes under the limit
refused, output files with odd names or of special kinds, and `orbit export` of them."""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import Orbit
from test_hardening_store import SYSTEM_PYTHON
from test_web_security import Answer, Live, _free_port, _run_dir, make_run
from test_web_security import live as live  # the fixture: a server started by `orbit web`

from orbit.store.home import Home

pytestmark = pytest.mark.slow


# --- lock files: no other user may hold them (finding 7) ---------------------------------
HOLD = """
import fcntl, sys, time
try:
    fd = open(sys.argv[1])
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError as exc:
    print("refused", exc.errno, flush=True)
    sys.exit(0)
print("held", flush=True)
time.sleep(60)
"""


def test_another_user_can_no_longer_block_orbit_web(
    tester: tuple[int, int], open_dir: Path
) -> None:
    """A home readable by every user, with the 0644 lock files an older Orbit left: another
    uid that flocks runtime/web.lock kept `orbit web` from starting."""
    home = open_dir / "shared"
    for folder in (home, home / "runtime", home / "locks"):
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)
    for lock in ("runtime/web.lock", "locks/scheduler.lock"):
        (home / lock).touch()
        (home / lock).chmod(0o644)
    (open_dir / "work").mkdir()
    orbit = Orbit(home, open_dir / "work")
    uid, gid = tester
    cmd = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", SYSTEM_PYTHON]
    holder = subprocess.Popen(
        [*cmd, "-c", HOLD, str(home / "runtime/web.lock")], stdout=subprocess.PIPE, text=True
    )
    try:
        first = holder.stdout.readline() if holder.stdout else ""
        # The older 0644 file: another user holds it, and the owner's first start is blocked.
        assert first.startswith("held"), first
        blocked = orbit("web", "--port", str(_free_port()))
        assert blocked.code != 0 and "did not start" in blocked.err, blocked
    finally:
        holder.kill()
        holder.wait()
    assert orbit("scheduler", "tick").code == 0
    started = orbit("web", "--port", str(_free_port()), "--json")
    try:
        assert started.code == 0, started.err
        for lock in ("runtime/web.lock", "locks/scheduler.lock"):  # narrowed by their owner
            assert stat.S_IMODE((home / lock).stat().st_mode) == 0o600, lock
        assert orbit("web", "--stop").code == 0
        (home / "runtime/web.lock").unlink()  # made anew: 0600 despite the umask of 022
        again = orbit("web", "--port", str(_free_port()), "--json")
        assert again.code == 0, again.err
        assert stat.S_IMODE((home / "runtime/web.lock").stat().st_mode) == 0o600
        tried = subprocess.run(
            [*cmd, "-c", HOLD, str(home / "runtime/web.lock")], capture_output=True, text=True
        )
        assert tried.stdout.startswith(f"refused {errno.EACCES}"), tried
    finally:
        orbit("web", "--stop")


# --- notes up to NOTE_MAX are taken, whatever their text (finding 5) -------------------------
def test_notes_up_to_the_documented_limit_are_accepted(live: Live) -> None:
    from orbit.web.run_page import NOTE_MAX

    run_id = make_run(live.home)
    sid = live.login()
    csrf = live.csrf(sid)

    def post(text: str) -> Answer:
        body = "text=" + quote(text, safe="") + f"&token={csrf}"
        return live.request(f"/runs/{run_id}/notes", method="POST", body=body.encode(), session=sid)

    cjk = "実験" * (58 * 1024 // 6)  # 58 KiB of UTF-8: 174 KiB urlencoded (Bottle took 100 KiB)
    lines = "a\r\n" * (NOTE_MAX // 2 - 8)  # newlines as a browser sends them: CRLF, `%0D%0A`
    full = "x" * NOTE_MAX
    for text in (cjk, lines, full):
        reply = post(text)
        assert reply.status == 303, (len(text), reply.status, reply.text[:200])
    notes = [json.loads(line) for line in (_run_dir(live.home, str(run_id)) / "notes.jsonl").open()]
    assert [n["text"] for n in notes] == [cjk, lines.replace("\r\n", "\n").strip(), full]
    too_long = post("x" * (NOTE_MAX + 1))
    assert too_long.status == 413 and "at most 64 KiB" in too_long.text
    huge = post("実" * 50_000)  # 450 KB urlencoded, beyond what Bottle parses: the same words
    assert huge.status == 413 and "at most 64 KiB" in huge.text, huge.text[:300]


# --- special files and odd names in output/ (findings 6 and 10) ----------------------------
def _odd_output(home: Home) -> tuple[str, Path]:
    """A run whose output/ holds what a `--root` container can make: a FIFO, a socket, a
    character device (1,3: the host's /dev/null) and names with a newline and a tab."""
    run_id = make_run(home)
    out = _run_dir(home, str(run_id)) / "output"
    os.mkfifo(out / "pipe")
    os.mknod(out / "chr", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(out / "sock"))
    sock.close()
    (out / "new\nline.txt").write_text("a newline\n")
    (out / "tab\there.txt").write_text("a tab\n")
    (out / "fine.txt").write_text("fine\n")
    os.symlink("fine.txt", out / "alias.txt")
    return str(run_id), out


def test_special_files_and_odd_names_are_listed_as_what_they_are_and_never_served(
    live: Live,
) -> None:
    run_id, _ = _odd_output(live.home)
    for page in (f"/runs/{run_id}", f"/runs/{run_id}/files/"):
        html = live.request(page, token=live.token).text
        for name, kind in (("pipe", "FIFO"), ("sock", "socket"), ("chr", "character device")):
            assert f'{name} <span class="kind">{kind}, not served</span>' in html, (page, name)
            assert f'files/{name}"' not in html, (page, name)  # no dead link
        for shown, quoted in (("new\\nline.txt", "new%0Aline.txt"), ("tab\\there.txt", "tab%09")):
            assert f'{shown} <span class="kind">a control character' in html, (page, shown)
            assert quoted not in html, (page, quoted)
        assert f'href="/runs/{run_id}/files/fine.txt"' in html
        assert f'"/runs/{run_id}/files/alias.txt">alias.txt</a> <span class="kind"' in html
    for name in ("pipe", "sock", "chr", "new%0Aline.txt", "tab%09here.txt"):
        for query in ("", "?raw=1"):
            reply = live.request(f"/runs/{run_id}/files/{name}{query}", token=live.token)
            assert reply.status in (403, 404), (name, query, reply.status)
    assert live.request(f"/runs/{run_id}/files/alias.txt?raw=1", token=live.token).body == b"fine\n"


def test_export_skips_fifos_sockets_and_devices(live: Live, tmp_path: Path) -> None:
    run_id, _ = _odd_output(live.home)
    live.orbit("mv", run_id, "odd")
    res = live.orbit("export", "odd", str(tmp_path / "out"), "--json")
    assert res.code == 0, res.err  # a FIFO made the copy fail (and a device would be read)
    copied = tmp_path / "out" / "odd" / run_id / "output"
    assert sorted(p.name for p in copied.iterdir()) == sorted(
        ["alias.txt", "fine.txt", "new\nline.txt", "tab\there.txt"]
    )
    assert (copied / "alias.txt").is_symlink()
