"""The web view's everyday use, in a real headless Chromium driven by Playwright.

One home with hand-written runs (a finished one with metrics, a failed one, a running one with
a long log, a queued one, one with a very long artifact name); the server is started and stopped
through `orbit web`, as a person would. Each test checks one thing a user does: read a chart by
hovering, scroll up in a followed log, use the keys after ticking a checkbox, log in on a styled
page, see why a run failed, read a run on a phone, drive the run and compare pages by keys.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import Orbit
from test_web_e2e import CHROMIUM, CHROMIUM_ARGS, NEEDS_CHROMIUM

from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore

TIMEOUT_MS = 10_000
PHONE = {"width": 390, "height": 844}
LONG_NAME = "a-very-long-artifact-name-" * 9 + ".txt"  # 238 characters, no break

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = [NEEDS_CHROMIUM, pytest.mark.chromium]


@dataclass
class Site:
    orbit: Orbit
    base: str
    finished: str  # succeeded; loss = 1/step for steps 1..50
    failed: str  # failed; its log ends with a traceback
    running: str  # running (hand-written: nothing ever finishes it); 400 log lines
    queued: str  # queued: a cancel ends it at once
    wide: str  # a 238-character artifact name, a long command

    def login_url(self) -> str:
        res = self.orbit("web", "--json")
        assert res.code == 0, res.err
        return str(res.json()["url"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(store: RunStore, name: str, state: RunState, reason: str = "", **spec: Any) -> Any:
    base = {
        "name": name,
        "group": "usability",
        "image": "python:3.12-slim",
        "command": ["python", "train.py"],
        "resources": {"cpus": 1.0, "mem_gb": 2.0, "gpus": 0},
        "params": {"lr": "0.1" if name == "finished" else "0.01"},
    }
    base.update(spec)
    fields: dict[str, Any] = {"exit_code": 3 if state is RunState.FAILED else None}
    if state is not RunState.QUEUED:
        fields["lease"] = {"cpus": 1.0, "mem_gb": 2.0, "gpus": []}
    return store.create(base, state=state, reason=reason, actor="test", status_fields=fields)


def _metrics(run: Any, scale: float) -> None:
    with open(run.path("metrics.jsonl"), "w") as fh:
        for step in range(1, 51):
            fh.write(json.dumps({"step": step, "loss": scale / step}) + "\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("web-use")
    (root / "work").mkdir()
    orbit = Orbit(root / "home", root / "work")
    store = RunStore(Home.from_environ(orbit.environ))
    finished = _run(store, "finished", RunState.SUCCEEDED)
    _metrics(finished, 1.0)
    finished.path("log.txt").write_text("".join(f"epoch {i}\n" for i in range(50)))
    failed = _run(store, "failed", RunState.FAILED, reason="exit code 3")
    _metrics(failed, 2.0)
    failed.path("log.txt").write_text(
        "".join(f"epoch {i}\n" for i in range(300))
        + "Traceback (most recent call last):\n"
        + '  File "train.py", line 9, in <module>\n\n   \n'
        + "step 300 done\n"  # the other stream's output, landed inside the traceback
        + "ValueError: bad config <b>not bold</b>\n\n"
    )
    running = _run(store, "running", RunState.RUNNING)
    running.path("log.txt").write_text("".join(f"line {i}\n" for i in range(400)))
    queued = _run(store, "queued", RunState.QUEUED)
    wide = _run(store, "wide", RunState.SUCCEEDED, command=["python", "-c", "x" * 300])
    (wide.path("output") / LONG_NAME).write_text("wide\n")
    for i in range(11):
        _run(store, f"many-{i}", RunState.SUCCEEDED, group="many")
    res = orbit("web", "--port", str(_free_port()), "--json")
    assert res.code == 0, res.err
    url = str(res.json()["url"])
    try:
        yield Site(
            orbit=orbit,
            base=url.split("/login", 1)[0],
            finished=finished.id,
            failed=failed.id,
            running=running.id,
            queued=queued.id,
            wide=wide.id,
        )
    finally:
        stopped = orbit("web", "--stop", "--json")
        assert stopped.code == 0 and stopped.json() == {"stopped": True}, stopped


@pytest.fixture(scope="module")
def browser(site: Site) -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(site: Site, browser: Any) -> Iterator[Any]:
    """A logged-in page at 1280x800."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    ctx.set_default_timeout(TIMEOUT_MS)
    try:
        p = ctx.new_page()
        p.goto(site.login_url())
        assert p.url == site.base + "/"
        yield p
    finally:
        ctx.close()


def _tip_at(page: Any, key: str, step: float, height: float) -> list[str]:
    """Move the pointer over `key`'s chart at x = `step`, `height` (0 bottom … 1 top) of the
    plot: the values its legend then shows (the x first, then each line's)."""
    fig = page.locator(f'figure.metric[data-key="{key}"]')
    fig.scroll_into_view_if_needed()
    plot = f"window.orbitCharts.figures[{json.dumps(key)}].plot"
    page.wait_for_function(f"() => window.orbitCharts && {plot}")
    box = fig.locator(".u-over").bounding_box()
    px = page.evaluate(f"() => {plot}.valToPos({step}, 'x')")
    page.mouse.move(box["x"] + px, box["y"] + (1 - height) * box["height"])
    return list(fig.locator(".u-legend .u-value").all_inner_texts())


def test_chart_hover_reads_the_data_not_the_pointer(site: Site, page: Any) -> None:
    page.goto(f"{site.base}/runs/{site.finished}")
    high, low = _tip_at(page, "loss", 10, 0.9), _tip_at(page, "loss", 10, 0.1)
    assert high == low == ["10", "0.1"], (high, low)
    assert _tip_at(page, "loss", 39.8, 0.5) == ["40", "0.025"]
    # On compare, each run's own value at the nearest step.
    page.goto(f"{site.base}/compare?ids={site.finished},{site.failed}")
    assert _tip_at(page, "loss", 20, 0.7) == ["20", "0.05", "0.1"]
    labels = page.locator('figure.metric[data-key="loss"] .u-legend .u-label').all_inner_texts()
    assert labels[1:] == [f"{site.finished} (finished)", f"{site.failed} (failed)"], labels


def _log_state(page: Any) -> dict[str, Any]:
    return dict(
        page.evaluate(
            "() => { const l = document.getElementById('log');"
            " return {top: l.scrollTop, max: l.scrollHeight - l.clientHeight,"
            " follow: document.getElementById('log-follow').checked, text: l.textContent}; }"
        )
    )


def test_scrolling_up_pauses_follow_and_the_end_resumes_it(site: Site, page: Any) -> None:
    log = site.orbit.run_dir(site.running) / "log.txt"
    page.goto(f"{site.base}/runs/{site.running}")
    first = _log_state(page)
    assert first["follow"] and first["max"] > 0 and first["top"] >= first["max"] - 8
    page.locator("#log").evaluate("el => { el.scrollTop = 0; }")
    page.wait_for_function("() => !document.getElementById('log-follow').checked")
    with open(log, "a") as fh:
        fh.write("new while reading\n")
    page.wait_for_function("() => document.getElementById('log').textContent.includes('new while')")
    page.wait_for_timeout(2500)  # a second poll with nothing new must not move it either
    reading = _log_state(page)
    assert reading["top"] == 0 and not reading["follow"], reading
    # Back at the end: follow is on again and new lines keep it there.
    page.locator("#log").evaluate("el => { el.scrollTop = el.scrollHeight; }")
    page.wait_for_function("() => document.getElementById('log-follow').checked")
    with open(log, "a") as fh:
        fh.write("".join(f"after {i}\n" for i in range(50)))
    page.wait_for_function("() => document.getElementById('log').textContent.includes('after 49')")
    page.wait_for_function(
        "() => { const l = document.getElementById('log');"
        " return l.scrollTop >= l.scrollHeight - l.clientHeight - 8; }"
    )


def test_shortcuts_work_after_clicking_a_checkbox(site: Site, page: Any) -> None:
    page.goto(f"{site.base}/?group=usability")
    for run_id in (site.finished, site.failed):
        page.click(f'tr.run[data-id="{run_id}"] input[name=ids]')  # the focus stays on it
    assert page.evaluate("() => document.activeElement.type") == "checkbox"
    page.keyboard.press("j")
    assert page.locator("tr.run.current").count() == 1
    page.keyboard.press("c")
    page.wait_for_url("**/compare?ids=**")
    assert sorted(page.url.split("ids=", 1)[1].split(",")) == sorted([site.finished, site.failed])
    # A text field still takes the letters as text.
    page.goto(f"{site.base}/")
    page.click("#search")
    page.keyboard.type("jc")
    assert page.url == f"{site.base}/" and page.input_value("#search") == "jc"


def _watch(page: Any) -> list[str]:
    """Console errors and warnings, script errors, failed requests and 4xx/5xx answers of
    anything but the page itself (the login page answers 401 on purpose: Chromium logs that
    status of the document itself, which is the one console line let through)."""
    seen: list[str] = []

    def console(m: Any) -> None:
        own_401 = m.location.get("url") == page.url and "status of 401" in m.text
        if m.type in ("error", "warning") and not (own_401 and page.url.endswith("/login")):
            seen.append(f"{m.type}: {m.text}")

    page.on("console", console)
    page.on("pageerror", lambda exc: seen.append(f"pageerror: {exc}"))
    page.on("requestfailed", lambda r: seen.append(f"failed: {r.url}"))
    page.on(
        "response",
        lambda r: (
            seen.append(f"{r.status}: {r.url}")
            if r.status >= 400 and r.request.resource_type != "document"
            else None
        ),
    )
    return seen


def test_the_login_page_is_styled(site: Site, browser: Any) -> None:
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        seen = _watch(page)
        page.goto(f"{site.base}/login")
        font = page.evaluate("() => getComputedStyle(document.body).fontFamily")
        assert "system-ui" in font, font
        form = page.locator("section.login form")
        assert form.evaluate("el => getComputedStyle(el).borderTopStyle") == "solid"
        assert page.locator("input[type=password]").bounding_box()["width"] > 200
        assert not seen, seen
    finally:
        ctx.close()


def test_no_page_logs_an_error_or_asks_for_a_missing_file(
    site: Site, browser: Any, page: Any
) -> None:
    seen = _watch(page)
    for path in (
        "/",
        f"/runs/{site.finished}",
        f"/runs/{site.running}",
        f"/runs/{site.failed}/files/",
        f"/compare?ids={site.finished},{site.failed}",
        "/resources",
        "/settings",
        "/failures?group=usability",
        "/lessons",
        "/lessons?group=usability",
        "/compare?group=usability",
    ):
        page.goto(site.base + path)
        page.wait_for_load_state("networkidle")
        # An inline icon: no request for /favicon.ico (Chromium's own fetch of it is not
        # reported to page events, so the link is what is checked).
        assert page.locator("link[rel=icon]").get_attribute("href").startswith("data:"), path
    assert not seen, seen
    logged_out = browser.new_context()
    try:
        visitor = logged_out.new_page()
        seen = _watch(visitor)
        for path in ("/login", f"/runs/{site.finished}"):  # the second one lands on /login
            visitor.goto(site.base + path)
            visitor.wait_for_load_state("networkidle")
            assert visitor.url.endswith("/login")
        assert not seen, seen
    finally:
        logged_out.close()


def test_a_failed_run_shows_the_end_of_its_log_by_the_reason(site: Site, page: Any) -> None:
    page.goto(f"{site.base}/runs/{site.failed}")
    box = page.locator("#run-error")
    assert box.is_visible() and box.bounding_box()["y"] < 400  # above the fold, by the reason
    lines = box.locator("pre").inner_text().splitlines()
    # The error excerpt (computed for a run settled without one): the frame and the exception.
    assert lines == [
        '  File "train.py", line 9, in <module>',
        "ValueError: bad config <b>not bold</b>",
    ]
    assert box.locator("b").count() == 0  # the log's text is never markup
    page.goto(f"{site.base}/runs/{site.finished}")
    assert page.locator("#run-error").count() == 0


def test_run_pages_fit_a_phone(site: Site, browser: Any) -> None:
    ctx = browser.new_context(viewport=PHONE)
    try:
        page = ctx.new_page()
        page.goto(site.login_url())
        for path in (
            f"/runs/{site.wide}",
            f"/runs/{site.finished}",
            f"/runs/{site.failed}",
            f"/runs/{site.running}",
            f"/runs/{site.wide}/files/",
            f"/compare?ids={site.finished},{site.failed},{site.wide}",
            "/compare?group=usability",
            "/lessons?group=usability",
        ):
            page.goto(site.base + path)
            width = page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
            assert width[0] <= width[1], (path, width)
        page.goto(f"{site.base}/runs/{site.wide}")
        link = page.locator("#artifacts a", has_text="a-very-long").first
        assert link.bounding_box()["x"] + link.bounding_box()["width"] <= PHONE["width"]
    finally:
        ctx.close()


def test_run_and_compare_pages_have_shortcuts(site: Site, page: Any) -> None:
    page.goto(f"{site.base}/runs/{site.running}")
    page.keyboard.press("?")
    keys = page.locator("#keys")
    assert keys.is_visible() and "follow" in keys.inner_text()
    page.keyboard.press("?")
    assert not keys.is_visible()
    assert page.is_checked("#log-follow")
    page.keyboard.press("f")
    assert not page.is_checked("#log-follow")
    page.keyboard.press("f")
    assert page.is_checked("#log-follow")
    page.keyboard.press("/")
    assert page.evaluate("() => document.activeElement.id") == "log-search"
    page.keyboard.press("Escape")
    page.keyboard.press("g")
    page.keyboard.press("r")
    page.wait_for_url(site.base + "/")

    # c cancels the page's run, after a confirm: dismissed, nothing happens.
    page.goto(f"{site.base}/runs/{site.queued}")
    asked: list[str] = []

    def answer(dialog: Any, accept: bool) -> None:
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, False))
    page.keyboard.press("c")
    page.wait_for_timeout(500)
    assert asked == [f"Cancel run {site.queued}?"]
    assert site.orbit.status(site.queued)["state"] == "queued"
    page.once("dialog", lambda d: answer(d, True))
    with page.expect_navigation():
        page.keyboard.press("c")
    assert page.url == f"{site.base}/runs/{site.queued}"
    assert page.locator("#run-state").inner_text() == "cancelled"
    assert site.orbit.status(site.queued)["state"] == "cancelled"

    # Compare: 1 … 9 open the n-th run; ? lists that.
    page.goto(f"{site.base}/compare?ids={site.finished},{site.failed}")
    page.keyboard.press("?")
    assert "n-th run" in page.locator("#keys").inner_text()
    page.keyboard.press("2")
    page.wait_for_url(f"**/runs/{site.failed}")
    page.keyboard.press("g")
    page.keyboard.press("r")
    page.wait_for_url(site.base + "/")


def test_compare_or_cancel_without_a_fitting_selection_says_why(site: Site, page: Any) -> None:
    page.goto(f"{site.base}/?group=usability")
    note = page.locator("#actions-note")
    page.click("#compare")
    assert page.url == f"{site.base}/?group=usability"
    assert note.inner_text() == "Select runs to compare first (x or the checkboxes)."
    page.click("#cancel")
    assert note.inner_text() == "Select runs to cancel first (x or the checkboxes)."
    # More than ten: compared all the same (no cap since the runs table of issue 24).
    page.goto(f"{site.base}/?group=many")
    assert page.locator("tr.run").count() == 11
    page.check("#select-all")
    page.click("#compare")
    page.wait_for_url("**/compare?ids=**")
    assert len(page.url.split("ids=", 1)[1].split("%2C" if "%2C" in page.url else ",")) == 11
