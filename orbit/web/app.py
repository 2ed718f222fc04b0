"""The Bottle application: login, the runs list, resources, settings and the run pages."""

from __future__ import annotations

import importlib
import logging
from typing import Any

import bottle

from orbit.store.home import Home
from orbit.web.context import COOKIE, STATIC, WebContext, load_or_create_token

log = logging.getLogger(__name__)

COOKIE_MAX_AGE = 30 * 86400
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


def local_path(target: str | None) -> str:
    """`target` if it is a path on this server, else `/` (no open redirect after login)."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


def make_app(home: Home, token: str | None = None) -> bottle.Bottle:
    ctx = WebContext(home, token or load_or_create_token(home))
    app = bottle.Bottle()
    app.config["orbit.ctx"] = ctx

    @app.hook("after_request")
    def security_headers() -> None:
        for name, value in SECURITY_HEADERS.items():
            bottle.response.set_header(name, value)

    @app.get("/login")
    def login() -> Any:
        sent = bottle.request.query.getunicode("token", "")
        if sent and ctx.token_ok(sent):
            bottle.response.set_cookie(
                COOKIE,
                ctx.token,
                path="/",
                httponly=True,
                samesite="strict",
                max_age=COOKIE_MAX_AGE,
            )
            bottle.redirect(local_path(bottle.request.query.getunicode("next")), 303)
        bottle.response.status = 401
        return ctx.render("login", title="Log in", wrong=bool(sent), logged_in=ctx.authorized())

    @app.post("/logout")
    @ctx.require_auth
    def logout() -> None:
        ctx.check_csrf()
        bottle.response.delete_cookie(COOKIE, path="/")
        bottle.redirect("/login", 303)

    @app.get("/static/<path:path>")
    @ctx.require_auth
    def static(path: str) -> Any:
        return bottle.static_file(path, root=str(STATIC))

    @app.get("/resources")
    @ctx.require_auth
    def resources() -> str:
        from orbit.cli.resources import collect
        from orbit.env import Env

        try:
            data = collect(Env(environ=dict(home.environ)))
            error = None
        except Exception as exc:  # a page that says what broke beats a bare 500
            log.exception("resources failed")
            data, error = {}, f"{type(exc).__name__}: {exc}"
        return ctx.render("resources", title="Resources", data=data, error=error)

    @app.get("/api/resources")
    @ctx.require_auth
    def resources_api() -> dict[str, Any]:
        from orbit.cli.resources import collect
        from orbit.env import Env

        return collect(Env(environ=dict(home.environ)))

    @app.get("/settings")
    @ctx.require_auth
    def settings() -> str:
        from orbit.doctor import run_checks

        checks = run_checks(home)
        return ctx.render(
            "settings", title="Settings", checks=checks, home=str(home.root), config=home.config
        )

    @app.error(401)
    @app.error(403)
    @app.error(404)
    @app.error(400)
    def error_page(err: bottle.HTTPError) -> str:
        for name, value in SECURITY_HEADERS.items():
            bottle.response.set_header(name, value)
        return ctx.render("error", title=f"{err.status_code}", status=err.status, message=err.body)

    from orbit.web import listing

    listing.register(app, ctx)
    try:  # written alongside this module; the list works without it
        run_pages = importlib.import_module("orbit.web.run_pages")
    except ImportError as exc:
        if exc.name != "orbit.web.run_pages":
            raise
        log.info("orbit.web.run_pages is missing: no run detail or compare pages")
    else:
        run_pages.register(app, ctx)
    return app
