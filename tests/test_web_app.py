"""The web view through a real local HTTP server: login, refusal, escaping, listing, cancel."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from conftest import Orbit
from web_client import loopback

from orbit.service import web_unit
from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore
from orbit.web import server
from orbit.web.app import make_app
from orbit.web.auth import load_or_create_token, new_login_code, read_host, token_path


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass
class Reply:
    status: int
    headers: Any
    body: str

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Web:
    base: str
    token: str  # the master token (X-Orbit-Token)
    home: Home
    session: str = ""  # the browser session's cookie value, after login()
    csrf: str = ""  # its form token, as the pages show it
    opener: Any = field(default_factory=lambda: urllib.request.build_opener(_NoRedirect))

    @property
    def cookie_name(self) -> str:
        return "orbit_" + self.base.rsplit(":", 1)[1]

    def login(self) -> None:
        """Log in as a browser does: redeem a one-time code, keep the cookie and form token."""
        reply = self(f"/login?code={new_login_code(self.home, self.token)}", auth=False)
        assert reply.status == 303, reply
        self.session = reply.headers["Set-Cookie"].split(";")[0].split("=", 1)[1]
        page = self("/settings").body
        self.csrf = page.split('name="token" value="', 1)[1].split('"', 1)[0]

    def __call__(
        self,
        path: str,
        *,
        data: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        auth: bool = True,
    ) -> Reply:
        body = urlencode(data, doseq=True).encode() if data is not None else None
        # As a browser: by the home's secret host name (on 127.0.0.1: Python cannot resolve it).
        sent = {"Host": f"{read_host(self.home)}:{self.base.rsplit(':', 1)[1]}", **(headers or {})}
        req = urllib.request.Request(self.base + path, data=body, headers=sent)
        if auth:
            req.add_header("Cookie", f"{self.cookie_name}={self.session}")
        try:
            with self.opener.open(req, timeout=30) as resp:
                return Reply(resp.status, resp.headers, resp.read().decode())
        except urllib.error.HTTPError as err:
            return Reply(err.code, err.headers, err.read().decode())


@pytest.fixture
def web(orbit: Orbit) -> Iterator[Web]:
    home = Home.from_environ(orbit.environ)
    home.ensure()
    srv = server.bind(make_app(home), 0)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        web = Web(f"http://127.0.0.1:{srv.server_port}", load_or_create_token(home), home)
        web.login()
        yield web
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join()


def make_run(home: Home, name: str, state: RunState = RunState.SUCCEEDED, **spec: Any) -> str:
    full = {"name": name, "image": "busybox", "command": ["true"], **spec}
    reason = "waiting for the tick" if state is RunState.QUEUED else "exit code 0"
    return RunStore(home).create(full, state=state, reason=reason, actor="test").id


# --- login and refusal ------------------------------------------------------------------------
def test_token_file_is_private(web: Web) -> None:
    assert token_path(web.home).stat().st_mode & 0o777 == 0o600
    assert len(web.token) >= 32


def test_every_page_refuses_a_request_without_the_token(web: Web) -> None:
    for path in ("/", "/resources", "/settings", "/static/orbit.css"):
        reply = web(path, auth=False)
        assert reply.status in (302, 303) and reply.headers["Location"].endswith("/login"), path
    assert web("/api/runs", auth=False).status == 401
    wrong = web("/api/runs", auth=False, headers={"Cookie": f"{web.cookie_name}=nope"})
    assert wrong.status == 401
    assert web("/api/runs", auth=False, headers={"X-Orbit-Token": "nope"}).status == 401
    assert web("/api/runs", auth=False, headers={"X-Orbit-Token": web.token}).status == 200
    page = web("/login", auth=False)
    assert page.status == 401 and "orbit web" in page.body


def test_login_sets_a_strict_http_only_cookie_and_redirects_to_a_clean_url(web: Web) -> None:
    code = new_login_code(web.home, web.token)
    reply = web(f"/login?code={code}&next=/runs/3", auth=False)
    assert reply.status == 303 and reply.headers["Location"].endswith("/runs/3")
    cookie = reply.headers["Set-Cookie"]
    assert cookie.startswith(f"{web.cookie_name}=") and web.token not in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie.replace("strict", "Strict")
    again = web(f"/login?code={code}", auth=False)  # a code works once
    assert again.status == 401 and "Set-Cookie" not in again.headers and "not valid" in again.body
    bad = web("/login?code=wrong", auth=False)
    assert bad.status == 401 and "Set-Cookie" not in bad.headers and "not valid" in bad.body
    # Only a path on this server is followed after login.
    code = new_login_code(web.home, web.token)
    away = web(f"/login?code={code}&next=//evil.example/", auth=False)
    assert away.headers["Location"].endswith(".localhost:" + web.base.rsplit(":", 1)[1] + "/")


def test_a_post_needs_the_token_in_the_request_not_only_the_cookie(web: Web) -> None:
    run_id = make_run(web.home, "waiting", RunState.QUEUED)
    refused = web("/cancel", data={"ids": run_id})  # cookie only: what a foreign page can send
    assert refused.status == 403
    assert RunStore(web.home).load(run_id).state is RunState.QUEUED
    assert web("/cancel", data={"ids": run_id, "token": "x"}).status == 403
    assert web("/cancel", data={"ids": run_id, "token": web.token}).status == 403
    done = web("/cancel", data={"ids": run_id, "token": web.csrf, "back": "/?state=queued"})
    assert done.status == 303 and done.headers["Location"].endswith("/?state=queued")
    assert RunStore(web.home).load(run_id).state is RunState.CANCELLED
    events = RunStore(web.home).events(run_id)
    assert events[-1]["actor"].startswith("web:")


# --- the runs page -----------------------------------------------------------------------------
def test_run_data_is_escaped(web: Web) -> None:
    make_run(web.home, "<script>alert(1)</script>", group='"><img src=x onerror=alert(2)>')
    page = web("/")
    assert page.status == 200
    assert "<script>alert(1)</script>" not in page.body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.body
    assert "<img src=x" not in page.body
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]


def test_a_corrupt_run_shows_an_error_in_its_row_and_the_others_render(web: Web) -> None:
    good = make_run(web.home, "good-run")
    bad = make_run(web.home, "bad-run")
    (web.home.runs_dir / bad / "status.yaml").write_text("state: [unclosed\n")
    page = web("/")
    assert page.status == 200
    assert "good-run" in page.body
    row = page.body.split(f'data-id="{bad}"', 1)[1].split("</tr>", 1)[0]
    assert "cannot read this run" in row
    api = web("/api/runs").json()["runs"]
    assert api[good]["state"] == "succeeded" and api[bad]["error"]


def test_filters(web: Web) -> None:
    make_run(web.home, "alpha-1", group="lr", tags={"seed": "1"}, folder="exp/a")
    make_run(web.home, "alpha-2", RunState.FAILED, group="lr", tags={"seed": "2"})
    make_run(web.home, "beta", RunState.QUEUED, group="wd")

    def names(query: str) -> set[str]:
        body = web("/?" + query).body
        return {n for n in ("alpha-1", "alpha-2", "beta") if f">{n}<" in body}

    assert names("") == {"alpha-1", "alpha-2", "beta"}
    assert names("state=failed") == {"alpha-2"}
    assert names("name=alpha") == {"alpha-1", "alpha-2"}
    assert names("group=wd") == {"beta"}
    assert names("tag=seed=1") == {"alpha-1"}
    assert names("tag=seed") == {"alpha-1", "alpha-2"}
    assert names("folder=exp") == {"alpha-1"}
    assert names("q=BETA") == {"beta"}
    grouped = web("/?groupby=1&sort=name&desc=0").body
    assert grouped.index(">lr<") < grouped.index(">alpha-1<") < grouped.index(">wd<")


@pytest.mark.slow
def test_pagination_and_sorting(web: Web) -> None:
    ids = [make_run(web.home, f"r{i:03d}") for i in range(55)]
    first = web("/").body
    assert "page 1 of 2" in first and "55 runs" in first
    assert f'data-id="{ids[-1]}"' in first and f'data-id="{ids[0]}"' not in first
    second = web("/?page=2").body
    assert "page 2 of 2" in second and f'data-id="{ids[0]}"' in second
    assert second.count('<tr class="run"') == 5
    ascending = web("/?sort=name&desc=0").body
    assert ascending.index(">r000<") < ascending.index(">r001<")
    assert web("/?page=99").status == 200  # past the end: the last page


def test_live_state_endpoint(web: Web) -> None:
    a = make_run(web.home, "a", RunState.QUEUED)
    b = make_run(web.home, "b")
    runs = web(f"/api/runs?ids={a}").json()["runs"]
    assert set(runs) == {a} and runs[a]["state"] == "queued"
    assert set(web("/api/runs").json()["runs"]) == {a, b}


def test_resources_and_settings_pages(web: Web) -> None:
    make_run(web.home, "<b>queued</b>", RunState.QUEUED)
    page = web("/resources")
    assert page.status == 200 and "Queue" in page.body
    assert "&lt;b&gt;queued&lt;/b&gt;" in page.body
    settings = web("/settings")
    assert settings.status == 200 and "Doctor" in settings.body and "docker" in settings.body
    assert web("/static/orbit.js").status == 200


# --- `orbit web`: the background server -------------------------------------------------------
def test_orbit_web_starts_once_prints_a_login_url_and_stops(orbit: Orbit) -> None:
    first = orbit("web", "--json")  # 7717, or the next free port
    try:
        assert first.code == 0, first.err
        info = first.json()
        assert info["started"] is True
        assert info["url"].startswith(f"http://{read_host(Home.from_environ(orbit.environ))}:")
        again = orbit("web", "--json")
        assert again.code == 0 and again.json()["started"] is False
        assert again.json()["port"] == info["port"]
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            url, host = loopback(info["url"])
            opener.open(urllib.request.Request(url, headers=host), timeout=10)
        except urllib.error.HTTPError as err:
            assert err.code == 303 and "HttpOnly" in err.headers["Set-Cookie"]
        state = json.loads((orbit.home / "runtime" / "web.json").read_text())
        assert state["pid"] == info["pid"] and state["port"] == info["port"]
    finally:
        stopped = orbit("web", "--stop", "--json")
    assert stopped.code == 0 and stopped.json() == {"stopped": True}
    assert orbit("web", "--stop", "--json").json() == {"stopped": False}


def test_a_busy_explicit_port_is_an_error(orbit: Orbit) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        busy = sock.getsockname()[1]
        res = orbit("web", "--port", str(busy))
        assert res.code != 0 and f"port {busy}" in res.err
        orbit.environ["ORBIT_PORT"] = str(busy)
        res = orbit("web")
        assert res.code != 0 and f"port {busy}" in res.err


def test_web_unit_passes_systemd_analyze_verify(orbit: Orbit, tmp_path: Path) -> None:
    runtime = tmp_path / "user" / "run"  # a user account of its own, as in test_supervisor
    runtime.mkdir(parents=True, mode=0o700)
    orbit.environ.update(
        HOME=str(tmp_path / "user"),
        XDG_CONFIG_HOME=str(tmp_path / "user" / ".config"),
        XDG_RUNTIME_DIR=str(runtime),
    )
    orbit.environ.pop("DBUS_SESSION_BUS_ADDRESS", None)
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: apt-get install systemd"
    unit = tmp_path / "orbit-web.service"
    unit.write_text(web_unit.render_unit(Home.from_environ(orbit.environ)))
    done = subprocess.run(
        [analyze, "--user", "verify", str(unit)],
        capture_output=True,
        text=True,
        env=orbit.environ,
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr == "" and done.stdout == "", done
    assert "-m orbit web --serve" in unit.read_text()


def test_every_route_but_the_login_is_behind_it(web: Web) -> None:
    """Walks the application's own route table: a route added later cannot skip the check."""
    run_id = make_run(web.home, "guarded")
    fill = {
        "<run_id>": run_id,
        "<area:re:files|session>": "files",
        "<path:re:(?:/.*)?>": "/",
        "<path:path>": "orbit.css",
        "<job>": "j1",
    }
    routes = make_app(web.home).routes
    assert len(routes) >= 15
    for route in routes:
        path = route.rule
        for pattern, value in fill.items():
            path = path.replace(pattern, value)
        assert "<" not in path, route.rule
        if path == "/login":
            continue
        data = {"token": web.csrf, "ids": run_id, "text": "x"} if route.method == "POST" else None
        reply = web(path, data=data, auth=False)
        if route.method == "GET" and not path.startswith("/api/"):
            assert reply.status in (302, 303), (route.rule, reply.status)
            assert reply.headers["Location"].endswith("/login"), route.rule
        else:
            assert reply.status == 401, (route.method, route.rule, reply.status)
        if path != "/logout":  # logged in, it answers
            assert web(path, data=data).status < 500, route.rule
    assert Path(web.home.runs_dir / run_id / "notes.jsonl").read_text().count('"x"') == 1


def test_run_pages_are_registered_behind_the_login(web: Web) -> None:
    run_id = make_run(web.home, "<i>detail</i>")
    other = make_run(web.home, "other")
    assert web(f"/runs/{run_id}", auth=False).status in (302, 303)
    page = web(f"/runs/{run_id}")
    assert page.status == 200 and "&lt;i&gt;detail&lt;/i&gt;" in page.body
    assert "<i>detail</i>" not in page.body
    assert web(f"/compare?ids={run_id},{other}").status == 200


def test_cancel_a_running_docker_run_from_the_page(orbit: Orbit, web: Web, busybox: str) -> None:
    run_id = orbit.submit(
        "--image", busybox, "--no-project", "--cpus", "0.5", "--mem", "0.25", "--", "sleep", "60"
    )
    orbit.wait_for(run_id, lambda s: s["state"] == "running")
    assert web(f"/api/runs?ids={run_id}").json()["runs"][run_id]["state"] == "running"
    reply = web("/cancel", data={"ids": run_id}, headers={"X-Orbit-Token": web.token})
    assert reply.status == 303
    orbit.wait_for(run_id, lambda s: s["state"] == "cancelled", timeout=60)
    assert web(f"/api/runs?ids={run_id}").json()["runs"][run_id]["state"] == "cancelled"
