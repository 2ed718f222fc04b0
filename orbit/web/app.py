"""The Bottle application: login and resources here; the runs list, the run page, its files,
the compare page and settings in their own modules. Every route but the login is registered behind
`require_auth`, here, in one place."""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote, urlencode

import bottle

from orbit.store.home import Home
from orbit.web import bench, browse, compare, failures, lessons, listing, run_page, session
from orbit.web.auth import (
    SESSION_MAX_AGE_S,
    Auth,
    load_or_create_host,
    load_or_create_token,
    new_login_code,
    write_token,
)
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
# A form Bottle parses may be this large: a note of NOTE_MAX bytes, urlencoded, is up to 6 times
# longer (a newline, sent as CRLF, is `%0D%0A`; a CJK character 9 bytes for its 3). Bottle's own
# cap (100 KiB) refused notes well under NOTE_MAX with a bare 413.
FORM_MAX = 6 * run_page.NOTE_MAX + 8192
LOGIN_BODY_MAX = 4096  # the token form: a token of 43 characters and a `next` path


def _apply_headers(response: Any) -> None:
    """The security headers, where a handler did not set its own (the raw files' sandbox)."""
    for name, value in SECURITY_HEADERS.items():
        if name not in response.headers:
            response.set_header(name, value)


def host_ok(host: str | None, port: str, secret: str | None = None) -> bool:
    """A request names this server by a loopback name or its secret host name, and its port
    (DNS rebinding: every other name, other `*.localhost` names included, is refused)."""
    if host is None:
        return True  # HTTP/1.0 without Host: no browser sends that
    names = (*LOOPBACK_NAMES, secret) if secret else LOOPBACK_NAMES
    allowed = {f"{name}:{port}" for name in names}
    if port == "80":  # the default port is left out of Host
        allowed.update(names)
    return host.lower() in allowed


def check_host() -> None:
    req = bottle.request
    secret = current().auth.secret_host()
    if not host_ok(header("Host"), str(req.environ.get("SERVER_PORT", "")), secret):
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


def to_secret_host(ctx: WebContext, path_and_query: str) -> Any:
    """A 303 to the same server under its secret host name (the name browsers keep their
    session under). Only for a request that proved itself (a valid code, the token): the
    name is a secret, and an answer to anyone would give it away."""
    base = ctx.secret_base()
    if base is None:
        bottle.abort(503, "this home has no web host name: run `orbit web` for a new link")
    bottle.redirect(f"{base}{path_and_query}", 303)
    raise AssertionError("unreachable")


def login() -> Any:
    ctx = current()
    code = bottle.request.query.getunicode("code", "") or ""
    if code and not ctx.on_secret_host() and ctx.auth.code_ok(code):
        # A link of an older Orbit (127.0.0.1): on to the secret name, with the code unused.
        return to_secret_host(ctx, f"/login?{bottle.request.query_string}")
    # A HEAD (a link checker or preview) must not use up the one-time code.
    if code and bottle.request.method != "HEAD" and ctx.on_secret_host() and ctx.auth.redeem(code):
        return start_session(ctx)
    bottle.response.status = 401
    return ctx.render(
        "login",
        title="Log in",
        wrong=bool(code) or bool(bottle.request.query.get("token")),
        logged_in=ctx.authorized(),
        next=local_path(bottle.request.query.getunicode("next")),
        elsewhere=not ctx.on_secret_host(),
    )


def check_login_body() -> None:
    """POST /login takes a small urlencoded form only: anyone may post it, so nothing larger
    or multipart is parsed (a 1 MB body of 20,000 parts cost 0.6 s of CPU, before any check)."""
    req = bottle.request
    kind = (req.environ.get("CONTENT_TYPE") or "").split(";", 1)[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        bottle.abort(415, "the login form is sent as application/x-www-form-urlencoded")
    if req.content_length < 0 or req.content_length > LOGIN_BODY_MAX:
        bottle.abort(413, f"the login form is at most {LOGIN_BODY_MAX} bytes")


def login_with_token() -> Any:
    ctx = current()
    check_login_body()
    forms = bottle.request.forms
    if ctx.auth.token_ok(forms.getunicode("token")):
        if ctx.on_secret_host():
            return start_session(ctx)
        token = ctx.auth.token() or ""
        query = urlencode(
            {"code": new_login_code(ctx.home, token), "next": local_path(forms.getunicode("next"))}
        )
        return to_secret_host(ctx, f"/login?{query}")
    bottle.response.status = 401
    return ctx.render(
        "login",
        title="Log in",
        wrong=True,
        logged_in=False,
        next=local_path(None),
        elsewhere=not ctx.on_secret_host(),
    )


def logout() -> None:
    ctx = current()
    ctx.check_csrf()
    ctx.auth.revoke(ctx.session_id())
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
    elif err.status_code == 413 and err.body == "Request entity too large":  # Bottle's words
        message = f"the form is too large: a note is at most {run_page.NOTE_MAX // 1024} KiB"
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
    load_or_create_host(home)
    bottle.BaseRequest.MEMFILE_MAX = FORM_MAX  # read per request: Bottle has no per-app setting
    app = bottle.Bottle()
    app.config[CONFIG_KEY] = WebContext(home, Auth(home))
    app.add_hook("before_request", check_host)
    app.add_hook("after_request", security_headers)
    for method, path, func in routes():
        app.route(path, method, func)
    app.default_error_handler = error_page
    return app
