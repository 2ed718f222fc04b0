"""What every web page shares: the store, the auth state, the layout and the auth check.

Interface for page modules (orbit.web.listing, run_page, browse, compare): a module-level
table of plain functions, which orbit.web.app registers, each behind `require_auth`:

    def page(run_id: str) -> str:
        ctx = current()
        return ctx.render("run", title=f"run {run_id}", run=load_run(ctx, run_id))

    ROUTES = [("GET", "/runs/<run_id>", page)]

`current()` is the WebContext of the application serving the request (`app.config`).
`ctx.render(name, title=..., **kw)` renders templates/<name>.tpl and wraps it in base.tpl
(which links /static/orbit.css and /static/orbit.js and passes `csrf` for forms: a form that
POSTs puts `<input type="hidden" name="token" value="{{csrf}}">`). `ctx.check_csrf()` raises a
403 unless the request carries the master token in X-Orbit-Token or the session's form token
(a `token` form field or the X-Orbit-CSRF header); call it first in every POST handler.
`ctx.actor` names the web server in notes and events.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urljoin, urlsplit

import bottle

from orbit.errors import CorruptError, NotFoundError
from orbit.store.home import Home
from orbit.store.index import IndexCache
from orbit.store.model import Run
from orbit.store.runs import RunStore
from orbit.web import markdown, times
from orbit.web.auth import Auth, equal
from orbit.web.auth import load_or_create_token as load_or_create_token  # for scripts
from orbit.web.auth import token_path as token_path

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
CONFIG_KEY = "orbit.ctx"
RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
HEADER = "X-Orbit-Token"
CSRF_HEADER = "X-Orbit-CSRF"
COOKIES_MAX = 200  # same-name cookies of one request looked at
# An inline icon: browsers then ask for no /favicon.ico (which would be a 404 or a redirect).
FAVICON = (
    "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E"
    "%3Ccircle cx='8' cy='8' r='6' fill='none' stroke='%232457c5' stroke-width='2'/%3E"
    "%3Ccircle cx='13' cy='4' r='2' fill='%232457c5'/%3E%3C/svg%3E"
)

F = TypeVar("F", bound=Callable[..., Any])
Route = tuple[str, str, Callable[..., Any]]  # (method, path, function)


def header(name: str) -> str | None:
    """A request header as the server received it (bytes as latin-1 text), never an error:
    Bottle's `get_header` decodes UTF-8 and raises on other bytes, which made a 500 of any
    request with a stray byte in Host or X-Orbit-Token, before the login check."""
    value = bottle.request.environ.get("HTTP_" + name.upper().replace("-", "_"))
    return value if isinstance(value, str) else None


def cookie_name() -> str:
    """`orbit_<port>`: one cookie per server port, so two homes on two ports never collide."""
    port = str(bottle.request.environ.get("SERVER_PORT", "")).strip()
    return f"orbit_{port}" if port.isdigit() else "orbit_session"


def request_port() -> str:
    return str(bottle.request.environ.get("SERVER_PORT", "")).strip()


def cookies_named(name: str) -> list[str]:
    """Every value the Cookie header gives `name`, in order. A page on another port or another
    `*.localhost` name can set a cookie of the same name that the browser then sends too, so
    no single one of them is taken as the session (Bottle keeps only the last)."""
    found = []
    for part in (header("Cookie") or "").split(";"):
        key, eq, value = part.strip().partition("=")
        if eq and key == name:
            found.append(value.strip().strip('"'))
    return found


def local_path(target: str | None) -> str:
    """`target` if it is a path on this server, else `/` (no open redirect after login)."""
    if (
        not target
        or not target.startswith("/")
        or target.startswith("//")
        or "\\" in target
        or any(ord(c) < 0x20 or ord(c) == 0x7F for c in target)
    ):
        return "/"
    # What a browser would make of it, relative to this server, must stay on this server.
    joined = urlsplit(urljoin("http://orbit.invalid/", target))
    return target if joined.netloc == "orbit.invalid" else "/"


@dataclass
class WebContext:
    home: Home
    auth: Auth
    store: RunStore = field(init=False)
    actor: str = field(default_factory=lambda: f"web:{os.getpid()}")

    def __post_init__(self) -> None:
        self.store = RunStore(self.home, index_cache=IndexCache())

    # --- auth ---------------------------------------------------------------------------
    def on_secret_host(self) -> bool:
        """The request names this server by its secret host name (what browsers use)."""
        secret = self.auth.secret_host()
        host = (header("Host") or "").lower()
        port = request_port()
        return secret is not None and (
            host == f"{secret}:{port}" or (host == secret and port == "80")
        )

    def secret_base(self) -> str | None:
        """`http://o-….localhost:PORT`: where browsers use this server (None without a name)."""
        secret = self.auth.secret_host()
        return f"http://{secret}:{request_port()}" if secret else None

    def session_id(self) -> str | None:
        """The request's session id when it is a valid session, else None (checked once per
        request: the auth check, the CSRF check and the page's form token all ask). Only a
        request to the secret host name has one: a cookie sent to 127.0.0.1 or localhost is one
        every server on any port of them may have received, and counts for nothing."""
        environ = bottle.request.environ
        if "orbit.session" not in environ:
            # Chromium keeps at most 180 cookies a name: beyond that, a header is no browser's.
            sids = cookies_named(cookie_name())[:COOKIES_MAX] if self.on_secret_host() else []
            environ["orbit.session"] = next((s for s in sids if self.auth.session_ok(s)), None)
        found: str | None = environ["orbit.session"]
        return found

    def by_token(self) -> bool:
        """The request carries the master token in X-Orbit-Token (scripts)."""
        return self.auth.token_ok(header(HEADER))

    def authorized(self) -> bool:
        return self.by_token() or self.session_id() is not None

    def check_auth(self) -> None:
        """Refuse a request without a session or the token: 401 for the API and POSTs, else a
        redirect to /login."""
        if not self.authorized():
            req = bottle.request
            if req.method in ("GET", "HEAD") and not req.path.startswith("/api/"):
                bottle.redirect("/login")
            bottle.abort(401, "not logged in: run `orbit web` and open the URL it prints")

    def csrf(self) -> str:
        """The form token of this request's session ("" for a script using the master token)."""
        sid = self.session_id()
        return self.auth.csrf(sid) if sid else ""

    def check_csrf(self) -> None:
        """A POST must carry the master token in X-Orbit-Token, or the session's form token
        (form field `token` or X-Orbit-CSRF header): the cookie alone is not enough."""
        if self.by_token():
            return
        req = bottle.request
        sent = header(CSRF_HEADER) or req.forms.get("token")
        sid = self.session_id()
        if not sid or not equal(sent, self.auth.csrf(sid)):
            bottle.abort(403, "missing or wrong form token in the request (reload the page)")

    # --- rendering ----------------------------------------------------------------------
    def render(self, template_name: str, title: str = "Orbit", **kw: Any) -> str:
        """templates/<template_name>.tpl inside the base layout (SimpleTemplate escapes {{…}}).

        Both templates get `csrf` (the session's form token, for a POST form's hidden field),
        `when` (a timestamp as `<time>`, orbit/web/times.py) and `md` (markdown as safe HTML,
        within the page's markdown.Budget): `{{!when(t)}}`, `{{!md(text)}}`.
        A page for a visitor without a session (login, errors) carries its stylesheet inline
        and no script: /static/ is only served after the login. The top bar's "Lessons" leads
        to the lessons of the group the URL names (`?group=G`: a filtered list, a group's
        failures, settings or lessons), else to the list of groups.
        """
        lookup = [str(TEMPLATES)]
        csrf = self.csrf()
        authed = self.authorized()
        body = bottle.template(
            template_name,
            template_lookup=lookup,
            csrf=csrf,
            when=times.when,
            md=markdown.Budget().render,
            **kw,
        )
        page = bottle.template(
            "base",
            template_lookup=lookup,
            title=title,
            body=body,
            csrf=csrf,
            page=template_name,
            authed=authed,
            css="" if authed else stylesheet(),
            favicon=FAVICON,
            lessons_href=lessons_href(),
        )
        return str(page)


def lessons_href() -> str:
    group = (bottle.request.query.getunicode("group", "") or "").strip()
    return f"/lessons?group={quote(group, safe='')}" if group else "/lessons"


@functools.cache
def stylesheet() -> str:
    return (STATIC / "orbit.css").read_text()


def current() -> WebContext:
    """The WebContext of the application that serves this request."""
    ctx: WebContext = bottle.request.app.config[CONFIG_KEY]
    return ctx


def require_auth(func: F) -> F:
    """`func` only for a request with a session or the token (WebContext.check_auth)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        current().check_auth()
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def load_run(ctx: WebContext, run_id: str) -> Run:
    """The run, or a 404 page for an id that is malformed, unknown or unreadable."""
    if not RUN_ID.match(run_id):
        bottle.abort(404, f"no run {run_id!r}")
    try:
        return ctx.store.load(run_id)
    except NotFoundError as exc:
        bottle.abort(404, str(exc))
    except CorruptError as exc:
        bottle.abort(404, f"run {run_id} cannot be read: {exc}")
    raise AssertionError("unreachable")
