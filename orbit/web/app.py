"""The Bottle application: login and resources here; the runs list, the run page, its files,
the compare page and settings in their own modules. Every route but the login is registered behind
`require_auth`, here, in one place."""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote

import bottle

from orbit.store.home import Home
from orbit.web import bench, browse, compare, failures, lessons, listing, run_page, session
from orbit.web.auth import SESSION_MAX_AGE_S, Auth, load_or_create_token, write_token
from orbit.web.context import (
    CONFIG_KEY,
    STATIC,
    Route,
    WebContext,
    cookie_name,
    current,
    header,
    local_path,
    require_auth,
)
from orbit.web.folders import ROUTES as FOLDER_ROUTES
from orbit.web.settings import ROUTES as SETTINGS_ROUTES

log = logging.getLogger(__name__)

# Scripts and styles only from this server: run data can never become code, even if a
# template forgot to escape it; no other site may frame these pages.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
URL_SAFE = "/?&=#%:,+@!$()*~"  # kept as they are in a Refresh header (not ; ' or ")


def _apply_headers(response: Any) -> None:
    """The security headers, where a handler did not set its own (the raw files' sandbox)."""
    for name, value in SECURITY_HEADERS.items():
        if name not in response.headers:
            response.set_header(name, value)


def host_ok(host: str | None, port: str) -> bool:
    """A request names this server by a loopback name and its port (DNS rebinding)."""
    if host is None:
        return True  # HTTP/1.0 without Host: no browser sends that
    allowed = {f"{name}:{port}" for name in LOOPBACK_NAMES}
    if port == "80":  # the default port is left out of Host
        allowed.update(LOOPBACK_NAMES)
    return host.lower() in allowed


def check_host() -> None:
    req = bottle.request
    if not host_ok(header("Host"), str(req.environ.get("SERVER_PORT", ""))):
        bottle.abort(421, "this server answers only as 127.0.0.1, localhost or [::1]")


def security_headers() -> None:
    _apply_headers(bottle.response)


def start_session(ctx: WebContext) -> str:
    bottle.response.set_cookie(
        cookie_name(),
        ctx.auth.new_session(),
        path="/",
        httponly=True,
        samesite="strict",
        max_age=SESSION_MAX_AGE_S,
    )
    target = local_path(bottle.request.params.getunicode("next"))
    if header("Sec-Fetch-Site") == "cross-site":
        # A login link followed from another site, or from the file: page of `orbit web
        # --open`: browsers send no SameSite=Strict cookie along the redirects of such a
        # navigation, so a 303 would land on /login again. A page of this server that moves
        # on by itself starts a same-origin navigation, which carries the cookie.
        bottle.response.set_header("Refresh", f"0;url={quote(target, safe=URL_SAFE)}")
        return ctx.render("logged_in", title="Logged in", next=target)
    bottle.redirect(target, 303)
    raise AssertionError("unreachable")


def login() -> Any:
    ctx = current()
    code = bottle.request.query.getunicode("code", "") or ""
    # A HEAD (a link checker or preview) must not use up the one-time code.
    if code and bottle.request.method != "HEAD" and ctx.auth.redeem(code):
        return start_session(ctx)
    bottle.response.status = 401
    return ctx.render(
        "login",
        title="Log in",
        wrong=bool(code) or bool(bottle.request.query.get("token")),
        logged_in=ctx.authorized(),
        next=local_path(bottle.request.query.getunicode("next")),
    )


def login_with_token() -> Any:
    ctx = current()
    if ctx.auth.token_ok(bottle.request.forms.getunicode("token")):
        return start_session(ctx)
    bottle.response.status = 401
    return ctx.render("login", title="Log in", wrong=True, logged_in=False, next=local_path(None))


def logout() -> None:
    ctx = current()
    ctx.check_csrf()
    ctx.auth.revoke(bottle.request.get_cookie(cookie_name()))
    bottle.response.delete_cookie(cookie_name(), path="/")
    bottle.redirect("/login", 303)


def static(path: str) -> Any:
    return bottle.static_file(path, root=str(STATIC))


def resources() -> str:
    from orbit.sched.report import report

    ctx = current()
    try:
        data = report(ctx.home)
        error = None
    except Exception as exc:  # a page that says what broke beats a bare 500
        log.exception("resources failed")
        data, error = {}, f"{type(exc).__name__}: {exc}"
    return ctx.render("resources", title="Resources", data=data, error=error)


def resources_api() -> dict[str, Any]:
    from orbit.sched.report import report

    return report(current().home)


def wants_json() -> bool:
    """A request under /api/, or one that asks for JSON (a script posting a note or a cancel
    with `Accept: application/json`): its errors are JSON too, never the HTML page."""
    return bottle.request.path.startswith("/api/") or "application/json" in (header("Accept") or "")


def error_page(err: bottle.HTTPError) -> str:
    """Every status, 500 included: the security headers, and no traceback or host path; for
    the API, `{"error": "...", "status": N}` as application/json."""
    _apply_headers(bottle.response)
    ctx = current()
    # A page that broke says nothing of how; a 502 raised on purpose (a node that cannot be
    # read now: web/browse.py) says why, like any 4xx.
    if err.status_code >= 500 and (err.traceback or err.status_code != 502):
        if err.traceback:
            log.error(
                "%s %s failed:\n%s", bottle.request.method, bottle.request.path, err.traceback
            )
        message = "the server failed to build this page (see runtime/web.log)"
    else:  # no host paths in an answer: the home is named, not spelled out
        message = str(err.body).replace(str(ctx.home.root), "ORBIT_HOME")
    if wants_json():
        bottle.response.content_type = "application/json"
        return json.dumps({"error": message, "status": err.status_code})
    try:
        return ctx.render("error", title=f"{err.status_code}", status=err.status, message=message)
    except Exception:  # the error page itself must not fail
        return f"{err.status_code}"


PUBLIC: list[Route] = [("GET", "/login", login), ("POST", "/login", login_with_token)]
PAGES: list[Route] = [
    ("POST", "/logout", logout),
    ("GET", "/static/<path:path>", static),
    ("GET", "/resources", resources),
    ("GET", "/api/resources", resources_api),
    *SETTINGS_ROUTES,
    *FOLDER_ROUTES,
    *listing.ROUTES,
    *run_page.ROUTES,
    *browse.ROUTES,
    *session.ROUTES,
    *compare.ROUTES,
    *lessons.ROUTES,
    *failures.ROUTES,
    *bench.ROUTES,
]


def routes() -> list[Route]:
    """Every route of the application: the login as it is, every other behind the login."""
    return PUBLIC + [(method, path, require_auth(func)) for method, path, func in PAGES]


def make_app(home: Home, token: str | None = None) -> bottle.Bottle:
    """The application; `token` (tests) is written to web-token first."""
    if token is not None:
        write_token(home, token)
    else:
        load_or_create_token(home)
    app = bottle.Bottle()
    app.config[CONFIG_KEY] = WebContext(home, Auth(home))
    app.add_hook("before_request", check_host)
    app.add_hook("after_request", security_headers)
    for method, path, func in routes():
        app.route(path, method, func)
    app.default_error_handler = error_page
    return app
