"""A session only this server receives (audit findings 1 and 8).

Browsers send a cookie of 127.0.0.1 to every port of 127.0.0.1, so a browser that logged in
there handed its session to any server on the machine it visited: another user's, or a run's
own with `--host-network`. Browsers are therefore served under the home's secret host name
(`o-….localhost`, which Chromium resolves to the loopback itself), the cookie is host-only on
that name, and a cookie sent to any other name counts for nothing.

Every test drives a real `orbit web` server; the attacker's servers are real ones too (an
http.server in this process, busybox httpd in a real `--host-network` run) and the browser is
Debian's Chromium.
"""

from __future__ import annotations

import http.server
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import pytest
from conftest import SMALL, Orbit, _cleanup_containers
from docker_setup import BUSYBOX_IMAGE
from test_web_e2e import CHROMIUM, CHROMIUM_ARGS, NEEDS_CHROMIUM, SCREENSHOTS, TIMEOUT_MS
from test_web_security import Live, _free_port, make_run
from test_web_security import live as live  # the fixture: a server started by `orbit web`
from test_web_smaller import _odd_output

from orbit.web.auth import SECRET_HOST, host_path, read_host, token_path

pytestmark = pytest.mark.slow


def _cookies(header: str, prefix: str = "orbit_") -> list[tuple[str, str]]:
    found = []
    for part in header.split(";"):
        name, eq, value = part.strip().partition("=")
        if eq and name.startswith(prefix):
            found.append((name, value))
    return found


# --- the secret name, on the wire ----------------------------------------------------------
def test_the_printed_url_names_a_secret_host_and_base_url_stays_on_127(live: Live) -> None:
    shown = live.orbit("web", "--json").json()
    url = urlsplit(shown["url"])
    assert SECRET_HOST.fullmatch(url.hostname or "") and url.port == live.port
    assert shown["base_url"] == f"http://127.0.0.1:{live.port}"
    path = host_path(live.home)
    assert path.stat().st_mode & 0o777 == 0o600 and read_host(live.home) == url.hostname
    assert len(url.hostname or "") - len("o-.localhost") == 20  # 80 bits, in hex
    # The name is nowhere another user or a run could read it: web.json, web.log, pages.
    runtime = live.home.runtime_dir
    for name in ("web.json", "web.log"):
        assert str(url.hostname) not in (runtime / name).read_text(), name
    # The text output names the same host.
    text = live.orbit("web")
    assert f"http://{url.hostname}:{live.port}/login?code=" in text.out


def test_a_cookie_counts_only_under_the_secret_name(live: Live) -> None:
    sid = live.login()
    assert live.request("/api/runs", session=sid).status == 200
    for host in (f"127.0.0.1:{live.port}", f"localhost:{live.port}", f"[::1]:{live.port}"):
        # What another port's server received from a browser on these names is worth nothing.
        assert live.request("/api/runs", session=sid, headers={"Host": host}).status == 401
        page = live.request("/", session=sid, headers={"Host": host})
        assert page.status == 303 and page.headers["Location"] == f"http://{host}/login"
        # The token still works there, for scripts.
        assert live.request("/api/runs", token=live.token, headers={"Host": host}).status == 200
    # Every other *.localhost name is refused, as any other name.
    for host in ("evil.localhost", "o-0000000000000000000a.localhost", "localhost"):
        reply = live.request("/api/runs", session=sid, headers={"Host": f"{host}:{live.port}"})
        assert reply.status == (401 if host == "localhost" else 421), host


def test_no_answer_on_a_loopback_name_gives_the_secret_away(live: Live) -> None:
    secret = str(read_host(live.home))
    host = {"Host": f"127.0.0.1:{live.port}"}
    answers = [
        live.request(path, headers=host)
        for path in ("/", "/login", "/login?code=wrong", "/runs/1", "/settings", "/nothing")
    ]
    answers.append(live.request("/login", method="POST", body=b"token=wrong", headers=host))
    answers.append(live.request("/api/runs", headers={"Host": "evil.localhost"}))
    for reply in answers:
        assert secret not in reply.text and secret not in str(reply.headers), reply.status
    login = live.request("/login", headers=host)
    assert login.status == 401 and "keeps no session" in login.text


def test_a_link_on_127_goes_on_to_the_secret_name_with_its_code_unused(live: Live) -> None:
    url = urlsplit(live.login_url())
    old_style = f"{url.path}?{url.query}&next=/settings"
    host = {"Host": f"127.0.0.1:{live.port}"}
    for method in ("HEAD", "GET", "GET"):  # the code stays unused, however often
        moved = live.request(old_style, method=method, headers=host)
        assert moved.status == 303 and moved.cookie(live.cookie_name) is None
        assert moved.headers["Location"] == f"{live.base}{old_style}"
    reply = live.request(old_style)  # the browser, on the secret name: logs in, once
    assert reply.status == 303 and reply.headers["Location"].endswith("/settings")
    assert live.request(old_style, headers=host).status == 401  # used: nothing to move on
    # The token form on 127.0.0.1: a fresh code, on the secret name.
    form = f"token={live.token}&next=/resources".encode()
    posted = live.request("/login", method="POST", body=form, headers=host)
    assert posted.status == 303 and posted.cookie(live.cookie_name) is None
    target = urlsplit(posted.headers["Location"])
    assert f"{target.hostname}:{target.port}" == live.host and "code=" in target.query
    logged = live.request(f"{target.path}?{target.query}")
    assert logged.status == 303 and logged.headers["Location"].endswith("/resources")


def test_any_same_name_cookie_that_is_a_session_counts(live: Live) -> None:
    sid = live.login()
    name = live.cookie_name
    for cookie in (f"{name}={sid}; {name}=garbage", f"{name}=x; {name}={sid}; {name}=y"):
        assert live.request("/api/runs", headers={"Cookie": cookie}).status == 200, cookie
    assert live.request("/api/runs", headers={"Cookie": f"{name}=x; {name}=y"}).status == 401
    # Logging out revokes the valid one, wherever it stood.
    csrf = live.csrf(sid)
    out = live.request(
        "/logout",
        method="POST",
        body=f"token={csrf}".encode(),
        headers={"Cookie": f"{name}={sid}; {name}=tossed"},
    )
    assert out.status == 303
    assert live.request("/api/runs", session=sid).status == 401


def test_rotate_makes_a_new_name_and_the_old_one_is_refused(live: Live) -> None:
    old_host = live.host
    sid = live.login()
    assert live.orbit("web", "--rotate").code == 0
    assert live.host != old_host
    assert live.request("/api/runs", session=sid, headers={"Host": old_host}).status == 421
    assert live.request("/api/runs", session=live.login()).status == 200
    # Without the file no session counts; `orbit web` makes a new name.
    sid = live.login()
    host_path(live.home).unlink()
    assert live.request("/api/runs", session=sid, headers={"Host": old_host}).status == 421
    assert live.request("/api/runs", session=live.login()).status == 200
    assert token_path(live.home).exists()


# --- the login form: a small urlencoded body only (finding 9) -------------------------------
def _multipart(parts: int, size: int) -> tuple[bytes, str]:
    """A multipart body of `parts` fields, about `size` bytes (the audit's: 1 MB, 20,000)."""
    head = b'--b\r\nContent-Disposition: form-data; name="a"\r\n\r\n'
    value = b"x" * max(1, (size - 8) // parts - len(head) - 2)
    return b"".join(head + value + b"\r\n" for _ in range(parts)) + b"--b--\r\n", (
        "multipart/form-data; boundary=b"
    )


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_the_login_form_parses_only_a_small_urlencoded_body(live: Live) -> None:
    body, kind = _multipart(20_000, 1_000_000)
    pid = int(live.orbit("web", "--json").json()["pid"])
    before = _cpu_s(pid)
    reply = live.request("/login", method="POST", body=body, headers={"Content-Type": kind})
    spent = _cpu_s(pid) - before
    print(f"1 MB multipart POST /login of 20,000 parts: {reply.status}, {spent:.2f} s CPU")
    assert len(body) > 900_000 and reply.status == 415 and "urlencoded" in reply.text
    assert spent < 0.1  # parsing it took 0.2 s here (0.6 s in the audit)
    big = b"token=" + b"x" * 8000
    assert live.request("/login", method="POST", body=big).status == 413
    plain = {"Content-Type": "text/plain"}
    assert live.request("/login", method="POST", body=b"token=x", headers=plain).status == 415
    ok = live.request("/login", method="POST", body=f"token={live.token}".encode())
    assert ok.status == 303 and ok.cookie(live.cookie_name)


# --- in Chromium: other servers on the machine get nothing ------------------------------------
class Thief(http.server.BaseHTTPRequestHandler):
    """Another local user's server: logs the Cookie header of every visit, redirects once to
    itself (a same-site navigation), and tries to log the user out by setting same-name
    cookies (host-only, and Domain=localhost when visited as evil.localhost)."""

    seen: ClassVar[list[str]] = []
    toss: ClassVar[str] = "orbit_0"

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Cookie", ""))
        if self.path == "/":
            self.send_response(302)
            self.send_header("Location", "/again")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Set-Cookie", f"{self.toss}=tossed; Path=/; Max-Age=3600")
        if "evil.localhost" in self.headers.get("Host", ""):
            self.send_header("Set-Cookie", f"{self.toss}=tossed2; Domain=localhost; Path=/")
        self.end_headers()
        self.wfile.write(b"<p>another server on this machine</p>")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def thief(live: Live) -> Iterator[int]:
    Thief.seen, Thief.toss = [], live.cookie_name
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Thief)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def chromium() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            ctx = browser.new_context()
            ctx.set_default_timeout(TIMEOUT_MS)
            yield ctx
        finally:
            browser.close()


PROBE = "probe=seen"  # a cookie of 127.0.0.1 and localhost: proof that cookies reach the thief


def _logged_in(ctx: Any, live: Live) -> Any:
    name, value = PROBE.split("=")
    ctx.add_cookies(
        [
            {"name": name, "value": value, "domain": d, "path": "/"}
            for d in ("127.0.0.1", "localhost")
        ]
    )
    page = ctx.new_page()
    page.goto(live.login_url())
    assert page.url == live.base + "/", page.url
    return page


def _replays_fail(live: Live, header: str) -> None:
    """Whatever cookies a thief received, sent to this server, log no one in."""
    for name, value in _cookies(header):
        for host in (live.host, f"127.0.0.1:{live.port}"):
            cookie = {"Cookie": f"{live.cookie_name}={value}", "Host": host}
            assert live.request("/api/runs", headers=cookie).status == 401, (name, host)
            assert live.request("/", headers=cookie).status == 303, (name, host)


@NEEDS_CHROMIUM
@pytest.mark.chromium
def test_a_server_on_another_port_receives_no_session(
    live: Live, thief: int, chromium: Any
) -> None:
    run_id = make_run(live.home, name="still-here")
    page = _logged_in(chromium, live)
    for origin in (f"http://127.0.0.1:{thief}", f"http://localhost:{thief}"):
        page.goto(origin + "/")
        assert page.url == origin + "/again"
    assert len(Thief.seen) >= 4, Thief.seen  # two visits, each redirected once to itself
    print(f"the other server saw: {Thief.seen}")
    for header in Thief.seen:
        assert PROBE in header, header  # the browser sends it what it holds for these names
        assert all(value.startswith("tossed") for _, value in _cookies(header)), header
        _replays_fail(live, header)
    # Its same-name cookies (127.0.0.1 and localhost, host-only) log no one out.
    page.goto(live.base + "/")
    assert urlsplit(page.url).path == "/" and page.locator(f"tr.run[data-id='{run_id}']").count()


@NEEDS_CHROMIUM
@pytest.mark.chromium
def test_a_same_name_cookie_for_every_localhost_name_logs_no_one_out(
    live: Live, thief: int, chromium: Any
) -> None:
    _logged_in(chromium, live).goto(f"http://evil.localhost:{thief}/again")
    page = chromium.pages[0]
    tossed = [c for c in chromium.cookies() if c["value"] == "tossed2"]
    print(f"Chromium kept the Domain=localhost cookie: {tossed}")
    sent = []
    page.on("request", lambda r: sent.append(r.headers.get("cookie", "")))
    page.goto(live.base + "/settings")
    assert urlsplit(page.url).path == "/settings", page.url
    assert page.locator("form[action='/logout'] button").count() == 1
    if tossed:  # Chromium sent the tossed cookie beside the session: both reached the server
        assert any("tossed2" in header for header in sent), sent
    for header in Thief.seen:
        _replays_fail(live, header)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "session-after-tossing.png"))


HTTPD_RUN = """
set -e
mkdir -p /tmp/www/cgi-bin
cat > /tmp/www/cgi-bin/c <<'EOF'
#!/bin/sh
echo "$HTTP_COOKIE" >> "$ORBIT_OUTPUT/cookies.txt"
for c in $(echo "$HTTP_COOKIE" | tr ';' ' '); do
  wget -q -O - --header "Cookie: $c" "http://127.0.0.1:ORBIT_PORT/api/runs" \
    >> "$ORBIT_OUTPUT/stolen.txt" 2>> "$ORBIT_OUTPUT/refused.txt" || true
done
echo "Content-Type: text/html"
echo
echo "<p>TensorBoard</p>"
EOF
chmod +x /tmp/www/cgi-bin/c
httpd -p 127.0.0.1:HTTPD_PORT -h /tmp/www
touch "$ORBIT_OUTPUT/serving"
while [ ! -f "$ORBIT_OUTPUT/done" ]; do sleep 0.2; done
"""


@NEEDS_CHROMIUM
@pytest.mark.chromium
def test_a_host_network_run_serving_http_receives_no_session(
    live: Live, chromium: Any, docker_engine: None
) -> None:
    httpd_port = _free_port()
    script = HTTPD_RUN.replace("ORBIT_PORT", str(live.port)).replace("HTTPD_PORT", str(httpd_port))
    orbit: Orbit = live.orbit
    run_id = orbit.submit(
        *SMALL, "--image", BUSYBOX_IMAGE, "--host-network", "--", "sh", "-c", script
    )
    out = orbit.run_dir(run_id) / "output"
    try:
        deadline = time.monotonic() + 90
        while not (out / "serving").exists():
            assert time.monotonic() < deadline and not orbit.status(run_id).get("finished_at")
            time.sleep(0.2)
        page = _logged_in(chromium, live)
        for origin in (f"http://127.0.0.1:{httpd_port}", f"http://localhost:{httpd_port}"):
            page.goto(origin + "/cgi-bin/c")
            assert "TensorBoard" in page.content()
        seen = (out / "cookies.txt").read_text()
        print(f"the run's httpd saw: {seen!r}")
        assert seen.count(PROBE) >= 2 and "orbit_" not in seen
        assert not (out / "stolen.txt").exists() or "runs" not in (out / "stolen.txt").read_text()
        _replays_fail(live, seen)
        page.goto(live.base + "/")
        assert urlsplit(page.url).path == "/"
    finally:
        (out / "done").touch()
        orbit.wait_for(run_id, lambda s: bool(s.get("finished_at")), 60)
        _cleanup_containers(orbit.home)


@NEEDS_CHROMIUM
@pytest.mark.chromium
def test_what_a_person_sees_on_127_and_in_an_odd_output_folder(live: Live, chromium: Any) -> None:
    page = chromium.new_page()
    page.goto(f"http://127.0.0.1:{live.port}/")  # an old bookmark: no session there
    assert urlsplit(page.url).path == "/login"
    assert "keeps no session" in page.locator("main").inner_text()
    assert str(read_host(live.home)) not in page.content()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "session-login-on-127.png"))
    old = urlsplit(live.login_url())  # a link of the older form, on 127.0.0.1
    page.goto(f"http://127.0.0.1:{live.port}{old.path}?{old.query}")
    assert page.url == live.base + "/", page.url  # moved on to the secret name, logged in
    run_id, _ = _odd_output(live.home)
    page.goto(f"{live.base}/runs/{run_id}/files/")
    rows = page.locator("table.files tr.unservable")
    assert rows.count() == 5
    assert page.locator("table.files tr.unservable a").count() == 0
    text = page.locator("table.files").inner_text()
    for shown in ("pipe FIFO, not served", "chr character device, not served", "new\\nline.txt"):
        assert shown in text, text
    page.screenshot(path=str(SCREENSHOTS / "session-files-special.png"), full_page=True)
