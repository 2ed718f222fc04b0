"""The web view under attack: each test replays an attack (a file outside the run, a stolen
cookie, a forged request, a rebound host name, hostile input, an open redirect …) against a
real server started by `orbit web` (waitress, in its own process), real sockets, a real
container and Debian's Chromium."""

from __future__ import annotations

import ctypes
import errno
import http.client
import http.server
import json
import os
import resource
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from conftest import Orbit

from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore
from orbit.web import runfiles
from orbit.web.auth import new_login_code, read_host, sessions_path, token_path

pytestmark = pytest.mark.slow  # a real `orbit web` server per test (about 1 s each)

HOST_PASSWD = "root:x:0:0"  # the first line of this machine's /etc/passwd
SECURITY = ("Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options",
            "Referrer-Policy", "Cache-Control")  # fmt: skip
REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")

    def cookie(self, name: str) -> str | None:
        for value in self.headers.get_all("Set-Cookie") or []:
            if value.startswith(name + "="):
                return value.split(";", 1)[0].split("=", 1)[1]
        return None


@dataclass
class Live:
    """A server of a fresh home, started with `orbit web` as a person does."""

    orbit: Orbit
    port: int
    home: Home

    @property
    def base(self) -> str:
        """Where a browser opens this server: its secret host name (`orbit web`'s URL)."""
        return f"http://{self.host}"

    @property
    def host(self) -> str:
        """`o-….localhost:PORT`, the Host a browser sends (Python cannot resolve the name:
        requests go to 127.0.0.1 with this Host header)."""
        return f"{read_host(self.home)}:{self.port}"

    @property
    def cookie_name(self) -> str:
        return f"orbit_{self.port}"

    @property
    def token(self) -> str:
        return token_path(self.home).read_text().strip()

    def request(
        self,
        path: str,
        *,
        method: str = "GET",
        headers: dict[str, str | bytes] | None = None,
        body: bytes | None = None,
        session: str | None = None,
        token: str | None = None,
    ) -> Answer:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            sent = {"Host": self.host, **(headers or {})}
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            if session is not None:
                sent["Cookie"] = f"{self.cookie_name}={session}"
            if token is not None:
                sent["X-Orbit-Token"] = token
            if body is not None:
                sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
                sent["Content-Length"] = str(len(body))
            for k, v in sent.items():
                conn.putheader(k, v)
            conn.endheaders(body)
            resp = conn.getresponse()
            try:
                data = resp.read()
            except http.client.IncompleteRead as cut:  # Content-Length of one file, bytes of
                data = cut.partial  # another: what the old code did in a race
            return Answer(resp.status, resp.headers, data)
        finally:
            conn.close()

    def login_url(self, *args: str) -> str:
        res = self.orbit("web", *args, "--json")
        assert res.code == 0, res.err
        return str(res.json()["url"])

    def login(self) -> str:
        """A session, from the URL `orbit web` prints."""
        url = urlsplit(self.login_url())
        reply = self.request(f"{url.path}?{url.query}")
        assert reply.status == 303, reply
        sid = reply.cookie(self.cookie_name)
        assert sid
        return sid

    def csrf(self, session: str) -> str:
        page = self.request("/settings", session=session).text
        return page.split('name="token" value="', 1)[1].split('"', 1)[0]


@pytest.fixture
def live(orbit: Orbit) -> Iterator[Live]:
    port = _free_port()
    res = orbit("web", "--port", str(port), "--json")
    assert res.code == 0, res.err
    try:
        yield Live(orbit, port, Home.from_environ(orbit.environ))
    finally:
        orbit("web", "--stop")


def make_run(home: Home, name: str = "r", state: RunState = RunState.SUCCEEDED) -> str:
    spec = {"name": name, "image": "busybox", "command": ["true"]}
    return RunStore(home).create(spec, state=state, reason="exit code 0", actor="test").id


def _run_dir(home: Home, run_id: str) -> Path:
    return home.runs_dir / run_id


# --- no host file through a run -----------------------------------------------------------
RACE_SCRIPT = """
import ctypes, os, time
os.chdir(os.environ["ORBIT_OUTPUT"])
os.makedirs("real")
open("real/passwd", "w").write("decoy\\n")
os.symlink("/etc", "swap")
os.rename("real", "d")
open("ready", "w").close()
libc = ctypes.CDLL(None, use_errno=True)
end = time.time() + 40
while time.time() < end:
    libc.renameat2(-100, b"d", -100, b"swap", 2)  # RENAME_EXCHANGE
"""


def _hammer(live: Live, run_id: str, seconds: float) -> dict[str, int]:
    """Preview, raw and listing requests in a loop; counts of what came back."""
    counts = {"host": 0, "decoy": 0, "refused": 0, "other": 0}
    paths = [
        f"/runs/{run_id}/files/d/passwd?raw=1",
        f"/runs/{run_id}/files/d/passwd",
        f"/runs/{run_id}/files/d/",
    ]
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        reply = live.request(paths[i % 3], token=live.token)
        i += 1
        text = reply.text
        if HOST_PASSWD in text or "os-release" in text:
            counts["host"] += 1
        elif reply.status in (403, 404):
            counts["refused"] += 1
        elif "decoy" in text or (reply.status == 200 and "passwd" in text):
            counts["decoy"] += 1
        else:
            counts["other"] += 1
    return counts


def test_a_container_swapping_a_folder_and_a_symlink_never_gets_a_host_file_served(
    live: Live, python_image: str
) -> None:
    run_id = live.orbit.submit(
        "--image", python_image, "--no-project", "--cpus", "0.5", "--mem", "0.25",
        "--", "python3", "-c", RACE_SCRIPT,
    )  # fmt: skip
    ready = _run_dir(live.home, run_id) / "output" / "ready"
    deadline = time.monotonic() + 120
    while not ready.exists():
        status = live.orbit.status(run_id)
        assert time.monotonic() < deadline and not status.get("finished_at"), status
        time.sleep(0.2)
    counts = _hammer(live, run_id, 15)
    print(f"race against a real container: {counts}")
    assert counts["host"] == 0, counts
    # The race really ran: both sides of the swap were seen.
    assert counts["decoy"] > 0 and counts["refused"] > 0, counts


@pytest.mark.parametrize("openat2", [True, False], ids=["openat2", "walk"])
def test_open_beneath_under_a_rename_exchange_race(tmp_path: Path, openat2: bool) -> None:
    """The same race on the host, in a thread, against both ways of opening (openat2 and the
    O_NOFOLLOW walk); listings too."""
    run = tmp_path / "run"
    out = run / "output"
    (out / "d").mkdir(parents=True)
    (out / "d" / "passwd").write_text("decoy\n")
    os.symlink("/etc", out / "swap")
    libc = ctypes.CDLL(None, use_errno=True)
    stop = threading.Event()

    def swap() -> None:
        a, b = os.fsencode(out / "d"), os.fsencode(out / "swap")
        while not stop.is_set():
            libc.renameat2(-100, a, -100, b, 2)

    saved = dict(runfiles._openat2_state)
    runfiles._openat2_state["usable"] = None if openat2 else False
    thread = threading.Thread(target=swap)
    thread.start()
    seen = {"host": 0, "decoy": 0, "refused": 0}
    try:
        end = time.monotonic() + 3
        while time.monotonic() < end:
            for rel in ("d/passwd", "d"):
                try:
                    with runfiles.opened(run, "output", rel) as (fd, st):
                        if stat.S_ISREG(st.st_mode):
                            with runfiles.read_file(fd) as fh:
                                data = fh.read().decode()
                        else:
                            data = " ".join(e.name for e in runfiles.list_dir(fd)[0])
                except (runfiles.Refused, runfiles.NotFoundError):
                    seen["refused"] += 1
                    continue
                if HOST_PASSWD in data or "os-release" in data:
                    seen["host"] += 1
                else:
                    seen["decoy"] += 1
    finally:
        stop.set()
        thread.join()
        runfiles._openat2_state.update(saved)
    print(f"host race ({'openat2' if openat2 else 'walk'}): {seen}")
    assert seen["host"] == 0 and seen["decoy"] > 0 and seen["refused"] > 0, seen


def test_fifos_and_links_out_are_never_opened(live: Live) -> None:
    run_id = make_run(live.home)
    out = _run_dir(live.home, run_id) / "output"
    os.mkfifo(out / "pipe")  # opening it for reading would block a worker for good
    os.symlink("/etc", out / "etc")
    for path in ("pipe", "pipe?raw=1", "etc/passwd", "etc/passwd?raw=1", "etc/"):
        p, _, q = path.partition("?")
        reply = live.request(f"/runs/{run_id}/files/{p}?{q}", token=live.token)
        assert reply.status in (403, 404), path
        assert HOST_PASSWD not in reply.text and "os-release" not in reply.text


# --- the cookie is a revocable session, not the master token ---------------------------
def test_the_cookie_is_a_per_port_session_never_the_master_token(live: Live) -> None:
    run_id = make_run(live.home, state=RunState.QUEUED)
    sid = live.login()
    assert sid != live.token and live.token not in sid
    assert live.request("/api/runs", session=sid).status == 200
    # The session id is no X-Orbit-Token, and the master token is no cookie.
    assert live.request("/api/runs", token=sid).status == 401
    assert live.request("/api/runs", session=live.token).status == 401
    assert live.request("/api/runs", headers={"Cookie": f"orbit_token={live.token}"}).status == 401
    # Kept server-side as a hash, in a private file.
    path = sessions_path(live.home)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sid not in path.read_text()
    # The form token comes from the session, and no page shows the master token.
    csrf = live.csrf(sid)
    assert csrf and csrf != sid and csrf != live.token
    for page in ("/", "/settings", "/resources", f"/runs/{run_id}", f"/runs/{run_id}/files/",
                 "/login"):  # fmt: skip
        reply = live.request(page, session=sid)
        assert reply.status == 200 or page == "/login", page
        assert live.token not in reply.text and sid not in reply.text, page
    # A POST needs the form token: the cookie alone (what another site can make a browser
    # send) or the master token in the form are refused.
    form = f"ids={run_id}".encode()
    assert live.request("/cancel", method="POST", body=form, session=sid).status == 403
    with_master = form + f"&token={live.token}".encode()
    assert live.request("/cancel", method="POST", body=with_master, session=sid).status == 403
    ok = live.request("/cancel", method="POST", body=form + f"&token={csrf}".encode(), session=sid)
    assert ok.status == 303
    # Scripts: the master token in the header is enough.
    note = f"/runs/{run_id}/notes"
    by_script = live.request(note, method="POST", body=b"text=hi", token=live.token)
    assert by_script.status == 303


def test_logout_revokes_the_session_on_the_server(live: Live) -> None:
    sid = live.login()
    other = live.login()
    csrf = live.csrf(sid)
    out = live.request("/logout", method="POST", body=f"token={csrf}".encode(), session=sid)
    assert out.status == 303
    # A copy of the cookie kept elsewhere no longer works; other sessions do.
    assert live.request("/api/runs", session=sid).status == 401
    assert live.request("/api/runs", session=other).status == 200


def test_sessions_survive_a_server_restart(live: Live) -> None:
    sid = live.login()
    assert live.orbit("web", "--stop").code == 0
    assert live.orbit("web", "--port", str(live.port)).code == 0
    assert live.request("/api/runs", session=sid).status == 200


# --- rotating the token ---------------------------------------------------------------------
def test_rotate_logs_everyone_out_and_the_new_link_works_at_once(live: Live) -> None:
    sid = live.login()
    old = live.token
    res = live.orbit("web", "--rotate")
    assert res.code == 0, res.err
    assert live.token != old
    assert live.request("/api/runs", token=old).status == 401
    assert live.request("/api/runs", session=sid).status == 401
    assert live.request("/api/runs", token=live.token).status == 200
    new = live.login()
    assert live.request("/api/runs", session=new).status == 200


def test_deleting_the_token_file_has_the_same_effect(live: Live) -> None:
    sid = live.login()
    unused = urlsplit(live.login_url())
    old = live.token
    token_path(live.home).unlink()
    assert live.request("/api/runs", token=old).status == 401
    assert live.request("/api/runs", session=sid).status == 401
    url = urlsplit(live.login_url())  # makes a new token
    assert live.token != old
    assert live.request(f"{unused.path}?{unused.query}").status == 401  # made for the old one
    reply = live.request(f"{url.path}?{url.query}")
    assert reply.status == 303
    assert live.request("/api/runs", session=reply.cookie(live.cookie_name)).status == 200


# --- login links ------------------------------------------------------------------------
def test_the_printed_login_link_is_one_time_and_short_lived(live: Live) -> None:
    url = urlsplit(live.login_url())
    assert live.token not in url.query and "code=" in url.query
    assert live.request(f"{url.path}?{url.query}").status == 303
    again = live.request(f"{url.path}?{url.query}")
    assert again.status == 401 and again.cookie(live.cookie_name) is None
    # An expired code is refused (the code's file records when it was made).
    code = new_login_code(live.home, live.token)
    for path in (live.home.runtime_dir / "web-login").iterdir():
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "created": data["created"] - 601}))
    assert live.request(f"/login?code={code}").status == 401
    # The master token logs in only through the form (a POST: never in a URL).
    assert live.request(f"/login?token={live.token}").status == 401
    form = f"token={live.token}&next=/settings".encode()
    posted = live.request("/login", method="POST", body=form)
    assert posted.status == 303 and posted.headers["Location"].endswith("/settings")


def test_a_head_request_does_not_use_up_a_login_code(live: Live) -> None:
    url = urlsplit(live.login_url())
    head = live.request(f"{url.path}?{url.query}", method="HEAD")
    assert head.cookie(live.cookie_name) is None
    reply = live.request(f"{url.path}?{url.query}")
    assert reply.status == 303 and reply.cookie(live.cookie_name)


def test_open_hands_the_browser_a_private_file_not_the_link(live: Live, tmp_path: Path) -> None:
    seen = tmp_path / "argv.json"
    browser = tmp_path / "browser"
    browser.write_text(
        f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(seen)!r}, 'w'))\n"
    )
    browser.chmod(0o755)
    env = {**live.orbit.environ, "BROWSER": f"{browser} %s", "PYTHONPATH": str(REPO)}
    res = subprocess.run(
        [sys.executable, "-m", "orbit", "web", "--open", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    deadline = time.monotonic() + 20
    while not seen.exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    argv = json.loads(seen.read_text())
    assert len(argv) == 1 and "code=" not in argv[0] and live.token not in argv[0]
    page = Path(urlsplit(argv[0]).path)
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    target = urlsplit(page.read_text().split("url=", 1)[1].split('"', 1)[0].replace("&amp;", "&"))
    assert live.request(f"{target.path}?{target.query}").status == 303
    printed = urlsplit(json.loads(res.stdout)["url"])  # the printed link: another code
    assert live.request(f"{printed.path}?{printed.query}").status == 303


# --- connections ---------------------------------------------------------------------------
def _serve(orbit: Orbit, port: int, soft: int, hard: int) -> subprocess.Popen[bytes]:
    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    env = {**orbit.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "orbit", "web", "--serve", "--port", str(port)],
        env=env,
        preexec_fn=limits,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)


def _get(port: int, path: str = "/login", timeout: float = 30) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def test_a_thousand_idle_sockets_do_not_lock_others_out(orbit: Orbit) -> None:
    """Under a 1024 descriptor limit (soft = hard: it cannot be raised), 1,100 half-open
    requests; a normal GET still answers."""
    mine = resource.getrlimit(resource.RLIMIT_NOFILE)  # this test holds 1,100 sockets itself
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(mine[0], min(mine[1], 4096)), mine[1]))
    port = _free_port()
    proc = _serve(orbit, port, 1024, 1024)
    idle: list[socket.socket] = []
    try:
        for _ in range(1100):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
            idle.append(s)
        time.sleep(1)
        t0 = time.monotonic()
        for _ in range(3):
            assert _get(port, timeout=20) == 401
        print(f"3 GETs with 1,100 idle sockets open: {time.monotonic() - t0:.3f} s")
    finally:
        for s in idle:
            s.close()
        proc.terminate()
        proc.wait(10)
        resource.setrlimit(resource.RLIMIT_NOFILE, mine)


def test_downloads_that_are_never_read_do_not_freeze_the_server(live: Live) -> None:
    # A worker thread that writes a raw file itself blocks once 16 MiB wait for the client;
    # with the 8 workers held by clients that never read, nobody got an answer, ever.
    run_id = make_run(live.home)
    big = _run_dir(live.home, run_id) / "output" / "big.bin"
    with open(big, "wb") as fh:
        fh.write(os.urandom(1 << 20) * 40)
    stalled = []
    try:
        for _ in range(10):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", live.port))
            s.sendall(
                f"GET /runs/{run_id}/files/big.bin?raw=1 HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{live.port}\r\nX-Orbit-Token: {live.token}\r\n\r\n".encode()
            )
            stalled.append(s)
        time.sleep(2)  # the server has taken all ten requests
        assert _get(live.port, "/login", timeout=20) == 401
    finally:
        for s in stalled:
            s.close()
    whole = live.request(f"/runs/{run_id}/files/big.bin?raw=1", token=live.token)
    assert whole.status == 200 and whole.body == big.read_bytes()


def test_a_file_that_shrinks_while_it_is_sent_ends_the_download(live: Live) -> None:
    # Sent by waitress's file_wrapper, a file cut short made read() return b"" before
    # Content-Length: waitress retried it without end (a CPU at 100%) and never closed.
    run_id = make_run(live.home)
    big = _run_dir(live.home, run_id) / "output" / "big.bin"
    with open(big, "wb") as fh:
        fh.write(os.urandom(1 << 20) * 40)
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.connect(("127.0.0.1", live.port))
        s.sendall(
            f"GET /runs/{run_id}/files/big.bin?raw=1 HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{live.port}\r\nX-Orbit-Token: {live.token}\r\n\r\n".encode()
        )
        got = len(s.recv(1 << 20))
        time.sleep(0.5)
        os.truncate(big, 1000)
        s.settimeout(20)
        while data := s.recv(1 << 20):  # a timeout here: the server kept the download open
            got += len(data)
    assert got < 40 << 20
    assert _get(live.port) == 401


def test_fifty_concurrent_clients_all_get_answers(orbit: Orbit) -> None:
    port = _free_port()
    proc = _serve(orbit, port, 512, 4096)
    try:
        limits = Path(f"/proc/{proc.pid}/limits").read_text()
        line = next(x for x in limits.splitlines() if x.startswith("Max open files"))
        assert line.split()[3:5] == ["4096", "4096"], line  # soft raised to hard
        listening = subprocess.run(
            ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True
        ).stdout.split()
        assert int(listening[2]) >= 128, listening  # the listen backlog (Send-Q)
        statuses: list[int] = []
        times: list[float] = []

        def client() -> None:
            for _ in range(5):
                t0 = time.monotonic()
                statuses.append(_get(port))
                times.append(time.monotonic() - t0)

        threads = [threading.Thread(target=client) for _ in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        times.sort()
        print(f"250 GETs from 50 clients: p50 {times[125]:.3f} s, max {times[-1]:.3f} s")
        assert statuses == [401] * 250
    finally:
        proc.terminate()
        proc.wait(10)


# --- hostile input --------------------------------------------------------------------------
def test_hostile_metrics_and_json_give_pages_not_500s(live: Live) -> None:
    huge = make_run(live.home, "huge")
    deep = make_run(live.home, "deep")
    d_huge, d_deep = _run_dir(live.home, huge), _run_dir(live.home, deep)
    (d_huge / "metrics.jsonl").write_text(
        '{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 1' + "0" * 400 + "}\n"
        '{"step": 1' + "0" * 400 + ', "loss": 0.25}\n'
    )
    nested = "[" * 100_000 + "]" * 100_000
    (d_deep / "metrics.jsonl").write_text(f'{{"step": 1, "deep": {nested}, "loss": 1}}\n')
    (d_deep / "output" / "deep.json").write_text(nested)
    for path in (f"/runs/{huge}", f"/api/runs/{huge}/metrics", f"/runs/{deep}",
                 f"/api/runs/{deep}/metrics", f"/compare?ids={huge},{deep}",
                 f"/runs/{deep}/files/deep.json", f"/api/series?ids={huge},{deep}"):  # fmt: skip
        reply = live.request(path, token=live.token)
        assert reply.status == 200, (path, reply.text[-300:])


def test_non_ascii_tokens_are_refused_cleanly(live: Live) -> None:
    sid = live.login()
    cases: list[tuple[str, dict[str, str | bytes]]] = [
        ("/login?code=%C3%A9", {}),
        ("/login?token=%C3%A9", {}),
        ("/api/runs", {"X-Orbit-Token": b"\xc3\xa9"}),
        ("/api/runs", {"Cookie": f'{live.cookie_name}="\\351"'.encode()}),
        ("/api/runs", {"Cookie": f"{live.cookie_name}=".encode() + b"\xc3\xa9"}),
    ]
    for path, headers in cases:
        reply = live.request(path, headers=headers)
        assert 400 <= reply.status < 500, (path, headers, reply.status)
        assert all(h in reply.headers for h in SECURITY), (path, reply.headers)
    form = b"ids=1&token=%C3%A9"
    bad = live.request("/cancel", method="POST", body=form, session=sid,
                       headers={"X-Orbit-CSRF": b"\xc3\xa9"})  # fmt: skip
    assert bad.status == 403


def test_headers_with_bytes_that_are_not_utf8_are_refused_cleanly(live: Live) -> None:
    # Bottle's get_header decodes UTF-8 and raised on \xe9: a 500 before any login check.
    sid = live.login()
    csrf = live.csrf(sid)
    run_id = make_run(live.home)
    cases: list[tuple[str, str, dict[str, str | bytes], str | None, int]] = [
        ("GET", "/api/runs", {"X-Orbit-Token": b"\xe9"}, None, 401),
        ("GET", "/", {"X-Orbit-Token": b"\xff\xfe"}, None, 303),
        ("GET", "/api/runs", {"Host": b"127.0.0.1\xe9"}, None, 421),
        ("POST", f"/runs/{run_id}/notes", {"X-Orbit-CSRF": b"\xe9"}, sid, 403),
        ("POST", f"/runs/{run_id}/notes", {"X-Orbit-CSRF": csrf, "Accept": b"\xe9"}, sid, 303),
        ("POST", "/cancel", {"X-Orbit-CSRF": csrf, "Accept": b"\xe9"}, sid, 303),
    ]
    for method, path, headers, session, status in cases:
        body = b"text=hi&ids=999" if method == "POST" else None
        reply = live.request(path, method=method, headers=headers, session=session, body=body)
        assert reply.status == status, (method, path, headers, reply.status)
        assert all(h in reply.headers for h in SECURITY), (path, reply.headers)


def test_every_answer_carries_the_security_headers(live: Live) -> None:
    run_id = make_run(live.home)
    # A directory as log.txt is a case the run page does not expect: it fails with a 500.
    # (A directory as events.jsonl no longer does: run files are read as regular files only,
    # and the page names the damage.)
    log = _run_dir(live.home, run_id) / "log.txt"
    log.unlink(missing_ok=True)
    log.mkdir()
    answers = {
        "500": live.request(f"/runs/{run_id}", token=live.token),
        "404": live.request("/nowhere", token=live.token),
        "405": live.request("/cancel", token=live.token),
        "303": live.request("/"),
        "401": live.request("/api/runs"),
        # A declared body over the limit is refused before it is sent.
        "413": live.request(
            "/cancel", method="POST", headers={"Content-Length": str(2 << 20)}, token=live.token
        ),
        "400": live.request("/api/runs?ids=" + ",".join(map(str, range(2000))), token=live.token),
        "421": live.request("/api/runs", headers={"Host": "evil.example"}, token=live.token),
    }
    for code, reply in answers.items():
        assert str(reply.status) == code, (code, reply.status, reply.text[:300])
        missing = [h for h in SECURITY if h not in reply.headers]
        assert not missing, (code, missing)
    failed = answers["500"].text
    assert "Traceback" not in failed and str(live.home.root) not in failed


# --- the raw files' sandbox -----------------------------------------------------------------
def test_raw_files_keep_their_sandbox_policy(live: Live) -> None:
    run_id = make_run(live.home)
    out = _run_dir(live.home, run_id) / "output"
    for name in ("a.json", "a.html", "a.svg", "a.bin"):
        (out / name).write_text('<svg xmlns="http://www.w3.org/2000/svg"><script>1</script></svg>')
    (_run_dir(live.home, run_id) / "code.diff").write_text("diff --git a/x b/x\n")
    paths = [f"/runs/{run_id}/files/{n}?raw=1" for n in ("a.json", "a.html", "a.svg", "a.bin")]
    for path in [*paths, f"/runs/{run_id}/code.diff"]:
        reply = live.request(path, token=live.token)
        assert reply.status == 200, path
        assert reply.headers.get_all("Content-Security-Policy") == ["sandbox; default-src 'none'"]
        assert reply.headers["X-Content-Type-Options"] == "nosniff"
    svg = live.request(paths[2], token=live.token)
    assert "attachment" in svg.headers["Content-Disposition"]


# --- no open redirect -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "target",
    ["//evil.example/", "/%09/evil.example/", "/%0a/evil.example/", "/%0d/evil.example/",
     "/%5Cevil.example/", "/\\evil.example/", "%2F%2Fevil.example", "http://evil.example/",
     "/%09%09/evil.example", "/%00/evil.example", "/%7F/evil.example"],
)  # fmt: skip
def test_no_open_redirect(live: Live, target: str) -> None:
    raw = target.replace("\\", "%5C")
    code = new_login_code(live.home, live.token)
    reply = live.request(f"/login?code={code}&next={raw}")
    assert reply.status == 303
    assert reply.headers["Location"] == f"{live.base}/", reply.headers["Location"]
    run_id = make_run(live.home, state=RunState.QUEUED)
    body = f"ids={run_id}&back={raw}".encode()
    back = live.request("/cancel", method="POST", body=body, token=live.token)
    assert back.status == 303 and back.headers["Location"] == f"{live.base}/"


def test_a_local_next_is_kept(live: Live) -> None:
    code = new_login_code(live.home, live.token)
    reply = live.request(f"/login?code={code}&next={quote('/runs/1?x=1#logs', safe='')}")
    assert reply.headers["Location"] == f"{live.base}/runs/1?x=1#logs"


# --- the Host header, response headers, what a page may load ------------------------------------
def test_the_host_header_must_name_this_server(live: Live) -> None:
    for host in (f"127.0.0.1:{live.port}", f"localhost:{live.port}", f"[::1]:{live.port}"):
        assert live.request("/api/runs", headers={"Host": host}, token=live.token).status == 200
    for host in ("evil.example", f"evil.example:{live.port}", "127.0.0.1:1", "localhost"):
        reply = live.request("/api/runs", headers={"Host": host}, token=live.token)
        assert reply.status == 421, host
        login = live.request("/login", headers={"Host": host})
        assert login.status == 421 and login.cookie(live.cookie_name) is None


def test_live_state_ids_are_deduplicated_and_capped(live: Live) -> None:
    run_id = make_run(live.home)
    same = live.request("/api/runs?ids=" + ",".join([run_id] * 400), token=live.token)
    assert same.status == 200 and list(json.loads(same.body)["runs"]) == [run_id]
    many = live.request("/api/runs?ids=" + ",".join(map(str, range(20000))), token=live.token)
    assert many.status == 400 and "at most" in many.text


def test_refusals_name_no_host_path_and_no_server_version(live: Live) -> None:
    run_id = make_run(live.home)
    out = _run_dir(live.home, run_id) / "output"
    os.symlink("loop2", out / "loop1")
    os.symlink("loop1", out / "loop2")
    os.symlink(str(live.home.root / "web-token"), out / "token")
    for name in ("loop1", "token", "token?raw=1"):
        p, _, q = name.partition("?")
        reply = live.request(f"/runs/{run_id}/files/{p}?{q}", token=live.token)
        assert reply.status == 403, name
        assert str(live.home.root) not in reply.text and live.token not in reply.text
    broken = make_run(live.home)
    (_run_dir(live.home, broken) / "status.yaml").write_text("state: [unclosed\n")
    reply = live.request(f"/runs/{broken}", token=live.token)
    assert reply.status == 404 and "ORBIT_HOME/runs" in reply.text
    assert str(live.home.root) not in reply.text
    reply = live.request("/login")
    server = reply.headers.get("Server") or ""
    assert "Python" not in server and "WSGIServer" not in server


# --- a browser as the attacker ------------------------------------------------------------------
CHROMIUM = os.environ.get("ORBIT_TEST_CHROMIUM", "/usr/bin/chromium")


@pytest.mark.chromium
def test_the_page_of_open_logs_chromium_in(live: Live, tmp_path: Path) -> None:
    # `orbit web --open` hands the browser a file: page that moves on to the login link. From a
    # file: (or any other site's) page the navigation is cross-site, and Chromium sends no
    # SameSite=Strict cookie along its redirects: the 303 after login landed on /login again.
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    run_id = make_run(live.home)
    env = {**live.orbit.environ, "BROWSER": "true %s", "PYTHONPATH": str(REPO)}
    res = subprocess.run(
        [sys.executable, "-m", "orbit", "web", run_id, "--open", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    opened = live.home.runtime_dir / "web-open.html"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-background-networking"]
        )
        try:
            page = browser.new_page()
            with page.expect_response(lambda r: urlsplit(r.url).path == f"/runs/{run_id}"):
                page.goto(opened.as_uri())
            page.wait_for_load_state()
            assert page.locator("main").inner_text().find("Log in to Orbit") < 0
            assert f"run {run_id}" in page.title(), page.title()
        finally:
            browser.close()


def test_a_request_flood_without_a_token_does_not_grow_the_log(live: Live) -> None:
    # waitress logged "Task queue depth is N" for each request that waited for a worker, and
    # "Client disconnected" for each client that hung up early: about 32 bytes a request.
    log = live.home.runtime_dir / "web.log"
    before = log.stat().st_size

    def client() -> None:
        for _ in range(10):
            _get(live.port)
            with socket.create_connection(("127.0.0.1", live.port)) as s:
                s.sendall(f"GET /login HTTP/1.1\r\nHost: 127.0.0.1:{live.port}\r\n\r\n".encode())

    threads = [threading.Thread(target=client) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _get(live.port) == 401
    grown = log.read_bytes()[before:].decode(errors="replace")
    assert len(grown) < 2000, grown[-500:]


def _loopback6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def test_the_server_holds_its_port_on_ipv6_loopback_too(live: Live) -> None:
    # A browser may resolve localhost to ::1 first: with the port free there, another local
    # user's server on [::1]:<port> got every visit to http://localhost:<port>/.
    if not _loopback6():
        pytest.skip("no IPv6 loopback on this host")
    with socket.socket(socket.AF_INET6) as squatter, pytest.raises(OSError) as taken:
        squatter.bind(("::1", live.port))
    assert taken.value.errno == errno.EADDRINUSE
    conn = http.client.HTTPConnection("::1", live.port, timeout=30)
    try:
        conn.request("GET", "/api/runs", headers={"X-Orbit-Token": live.token})
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def test_a_port_taken_on_ipv6_loopback_is_refused(orbit: Orbit) -> None:
    if not _loopback6():
        pytest.skip("no IPv6 loopback on this host")
    port = _free_port()
    with socket.socket(socket.AF_INET6) as squatter:
        squatter.bind(("::1", port))
        squatter.listen()
        try:
            res = orbit("web", "--port", str(port))
            assert res.code != 0 and "[::1]" in res.err and len(res.err.splitlines()) == 1
            started = orbit("web", "--json")  # no port asked: another one, free on both
            assert started.code == 0, started.err
            assert started.json()["port"] != port
        finally:
            orbit("web", "--stop")
