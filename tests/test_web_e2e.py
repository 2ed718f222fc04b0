"""The web view end to end, in a real headless Chromium driven by Playwright.

One home with two real busybox runs (made with Docker through `orbit run`) and two hand-written
ones; the server is started and stopped through `orbit web`, exactly as a person would. The
browser logs in with the printed URL, filters the runs, opens one, searches its log, counts the
chart lines, compares two runs and adds a note, and saves a screenshot of each page
(see SCREENSHOTS).

Needs Debian's `chromium` (scripts/ensure-docker.sh installs it) and the `playwright` package
(no browser download: Playwright drives /usr/bin/chromium). Skipped when either is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import Orbit, _cleanup_containers
from docker_setup import BUSYBOX_IMAGE
from web_client import browser_fetch

from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore

CHROMIUM = os.environ.get("ORBIT_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # required as root; the page only ever shows this test's own server
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# The README's screenshots are refreshed with ORBIT_SCREENSHOTS=docs/screenshots; a plain test
# run writes them to a temporary folder, so running the suite leaves the checkout unchanged.
SCREENSHOTS = Path(
    os.environ.get("ORBIT_SCREENSHOTS") or tempfile.mkdtemp(prefix="orbit-screenshots-")
).resolve()
WIDE = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
NEEDLE = "needle-line: the one line this test searches for"
NOTE = "e2e note: lr=0.1 diverges less than lr=0.01"
TIMEOUT_MS = 10_000

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
NEEDS_CHROMIUM = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)),
    reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)",
)
pytestmark = [NEEDS_CHROMIUM, pytest.mark.chromium]


@dataclass
class Site:
    orbit: Orbit
    login_url: str
    base: str
    docker_runs: list[str]  # two finished busybox runs: lr=0.1 and lr=0.01
    baseline: str  # hand-written, succeeded, 50 steps of loss and acc
    broken: str  # hand-written, failed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _docker_script(scale: int) -> str:
    return (
        "for i in $(seq 1 20); do "
        f'echo "{{\\"step\\": $i, \\"loss\\": $(( {scale} / i )), \\"acc\\": $(( i * 5 ))}}" '
        '>> "$ORBIT_METRICS"; echo "epoch $i"; done; '
        f'echo "{NEEDLE}"; echo done > "$ORBIT_OUTPUT/result.txt"'
    )


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def _hand_written(store: RunStore, name: str, state: RunState, exit_code: int) -> str:
    spec = {
        "name": name,
        "group": "handmade",
        "folder": "papers/ablation",
        "tags": {"lr": "1e-4"},
        "params": {"lr": "1e-4"},
        "image": "python:3.12-slim",
        "command": ["python", "train.py"],
        "resources": {"cpus": 1.0, "mem_gb": 2.0, "gpus": 0},
    }
    fields = {
        "exit_code": exit_code,
        "started_at": _iso(time.time() - 95),
        "lease": {"cpus": 1.0, "mem_gb": 2.0, "gpus": []},
        "peaks": {"mem_bytes": 3563520, "cpu_cores": 0.9, "cpu_seconds": 0.55},
    }
    reason = "" if state is RunState.SUCCEEDED else "exit code 1"
    run = store.create(spec, state=state, reason=reason, actor="test", status_fields=fields)
    with open(run.path("metrics.jsonl"), "w") as fh:
        for step in range(1, 51):
            fh.write(json.dumps({"step": step, "loss": 1.0 / step, "acc": step / 50}) + "\n")
    run.path("log.txt").write_text("".join(f"epoch {i}\n" for i in range(1, 51)) + "done\n")
    (run.path("output") / "result.json").write_text('{"score": 0.91}')
    return run.id


@pytest.fixture(scope="module")
def site(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("web-e2e")
    (root / "work").mkdir()
    orbit = Orbit(root / "home", root / "work")
    docker_runs = []
    for lr, scale in (("0.1", 100), ("0.01", 300)):
        args = [
            "--image", BUSYBOX_IMAGE, "--no-project", "--cpus", "0.5", "--mem", "0.25",
            "-n", f"docker-lr{lr}", "-g", "docker", "-t", f"lr={lr}",
            "--", "sh", "-c", _docker_script(scale),
        ]  # fmt: skip
        docker_runs.append(orbit.submit(*args))
    store = RunStore(Home.from_environ(orbit.environ))
    baseline = _hand_written(store, "baseline", RunState.SUCCEEDED, 0)
    broken = _hand_written(store, "broken", RunState.FAILED, 1)
    for run_id in docker_runs:
        status = orbit.wait_for(run_id, lambda s: bool(s.get("finished_at")), 60)
        assert status["state"] == "succeeded", status
    res = orbit("web", "--port", str(_free_port()), "--json")
    assert res.code == 0, res.err
    shown = res.json()
    assert shown["started"] is True
    login_url = str(shown["url"])
    try:
        yield Site(
            orbit=orbit,
            login_url=login_url,
            base=login_url.split("/login", 1)[0],
            docker_runs=docker_runs,
            baseline=baseline,
            broken=broken,
        )
    finally:
        stopped = orbit("web", "--stop", "--json")
        _cleanup_containers(orbit.home)
        assert stopped.code == 0 and stopped.json() == {"stopped": True}, stopped


@pytest.fixture(scope="module")
def browser(site: Site) -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def _chart(page: Any, key: str, what: str) -> Any:
    """`what`, a JS expression of `u` (the uPlot object of `key`'s chart), once it is drawn."""
    page.locator(f'figure.metric[data-key="{key}"]').scroll_into_view_if_needed()
    plot = f"window.orbitCharts.figures[{json.dumps(key)}].plot"
    page.wait_for_function(f"() => window.orbitCharts && window.orbitCharts.figures && {plot}")
    return page.evaluate(f"() => {{ const u = {plot}; return {what}; }}")


def _rows(page: Any) -> list[str]:
    return [str(r.get_attribute("data-id")) for r in page.locator("tr.run").all()]


def test_without_the_cookie_nothing_is_shown(site: Site, browser: Any) -> None:
    ctx = browser.new_context(viewport=WIDE)
    try:
        page = ctx.new_page()
        page.goto(site.base + "/")
        assert "/login" in page.url
        assert page.locator("tr.run").count() == 0
        page.goto(f"{site.base}/runs/{site.baseline}")
        assert "/login" in page.url and "baseline" not in page.content()
        api = browser_fetch(page, f"{site.base}/api/runs?ids={site.baseline}")
        assert api.status == 401
        note = browser_fetch(
            page,
            f"{site.base}/runs/{site.baseline}/notes",
            method="POST",
            form={"text": "sneaky", "token": "wrong"},
        )
        assert note.status in (401, 403)
        assert "sneaky" not in (site.orbit.run_dir(site.baseline) / "notes.jsonl").read_text()
        bad = ctx.new_page()
        bad.goto(site.base + "/login?code=not-a-code")
        assert bad.locator("tr.run").count() == 0
    finally:
        ctx.close()


def test_review_in_the_browser(site: Site, browser: Any) -> None:
    ctx = browser.new_context(viewport=WIDE)
    ctx.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    try:
        page = ctx.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on(
            "console",
            lambda msg: errors.append(msg.text) if msg.type == "error" else None,
        )
        a, b = site.docker_runs

        # Log in with the printed one-time URL: it becomes a session cookie (never the token)
        # and the URL is clean again.
        fresh = site.orbit("web", "--json")
        assert fresh.code == 0, fresh.err
        page.goto(str(fresh.json()["url"]))
        assert page.url == site.base + "/"
        assert "code=" not in page.url
        token = (site.orbit.home / "web-token").read_text().strip()
        cookies = {c["name"]: c["value"] for c in ctx.cookies()}
        port = site.base.rsplit(":", 1)[1]
        assert set(cookies) == {f"orbit_{port}"} and token not in cookies[f"orbit_{port}"]
        assert sorted(_rows(page)) == sorted([a, b, site.baseline, site.broken])
        assert page.locator(f'tr.run[data-id="{a}"] [data-field=state]').inner_text() == (
            "succeeded"
        )
        _shot(page, "runs")
        phone = ctx.new_page()
        phone.set_viewport_size(PHONE)
        phone.goto(site.base + "/")
        assert len(_rows(phone)) == 4
        _shot(phone, "run-phone")
        phone.close()

        # Filter by name, then by state.
        page.fill("input[name=name]", "docker")
        page.click("form.filters button[type=submit]")
        page.wait_for_url("**name=docker**")
        assert sorted(_rows(page)) == sorted([a, b])
        page.goto(site.base + "/")
        page.select_option("select[name=state]", "failed")
        page.click("form.filters button[type=submit]")
        page.wait_for_url("**state=failed**")
        assert _rows(page) == [site.broken]
        page.click("form.filters a[href='/']")
        page.wait_for_url(site.base + "/")
        assert len(_rows(page)) == 4

        # Open a real run; search its log for the known line.
        page.click(f'tr.run[data-id="{a}"] a[href="/runs/{a}"]')
        page.wait_for_url(f"**/runs/{a}")
        assert page.locator("#run-state").inner_text() == "succeeded"
        log = page.locator("#log")
        assert "epoch 20" in log.inner_text() and NEEDLE in log.inner_text()
        page.fill("#log-search", "NEEDLE-line")  # case-insensitive, server-side
        found = page.locator("#log-results li")
        found.first.wait_for()
        assert found.count() == 1 and found.first.inner_text().endswith(NEEDLE)
        assert log.is_visible()
        assert page.locator("#log-count").inner_text().startswith("1 matching line")
        page.fill("#log-search", "")
        assert "epoch 1\n" in log.inner_text()

        # One chart per numeric key (loss, acc; step is the x axis), one line each.
        figures = page.locator("#charts figure.metric")
        assert figures.count() == 2
        captions = [c.inner_text() for c in page.locator("#charts figcaption b").all()]
        assert sorted(captions) == ["acc", "loss"]
        for key in ("acc", "loss"):  # drawn by uPlot (static/charts.js): its data, one line
            assert _chart(page, key, "[u.series.length, u.data[0].length]") == [2, 20]
            assert page.locator(f'figure.metric[data-key="{key}"] canvas').is_visible()

        # Add a note through the form: it shows on the page and lands in notes.jsonl.
        page.fill("#notes textarea[name=text]", NOTE)
        page.click("#notes button[type=submit]")
        page.wait_for_url(f"**/runs/{a}#notes")
        assert page.locator("#notes .note-text").filter(has_text=NOTE).count() == 1
        notes_file = site.orbit.run_dir(a) / "notes.jsonl"
        notes = [json.loads(line) for line in notes_file.read_text().splitlines() if line]
        assert [n["text"] for n in notes] == [NOTE]
        assert str(notes[0]["author"]).startswith("web:")
        page.fill("#log-search", "")  # the page as it first shows, plus the new note
        _shot(page, "run")

        # Compare the two real runs: select both on the list, press Compare.
        page.goto(site.base + "/?name=docker")
        for run_id in (a, b):
            page.check(f'tr.run[data-id="{run_id}"] input[name=ids]')
        page.click("#compare")
        page.wait_for_url("**/compare?ids=**")
        title = page.locator("h1").inner_text()
        assert a in title and b in title
        legend = [x.inner_text() for x in page.locator("p.legend a").all()]
        assert len(legend) == 2
        page.wait_for_function("() => window.orbitCharts && window.orbitCharts.loads >= 1")
        assert page.locator("#charts figure.metric").count() == 2
        for key in ("acc", "loss"):
            labels, colors = _chart(
                page, key, "[u.series.map(s => s.label), u.series.map(s => s._stroke)]"
            )
            assert len(labels) == 3 and len(set(colors[1:])) == 2, (labels, colors)
        differs = page.locator("table.compare tr.differs")
        names = [r.locator("th").first.inner_text() for r in differs.all()]
        assert "lr" in names and "loss" in names
        lr_row = differs.filter(has=page.locator("th", has_text="lr")).first
        assert sorted(lr_row.locator("td").all_inner_texts()) == ["0.01", "0.1"]
        # A highlighted row really looks different from a plain one.
        plain = page.locator("table.compare tr:not(.differs)").filter(has=page.locator("td"))
        assert plain.count() > 0
        style = "el => getComputedStyle(el).backgroundColor"
        assert lr_row.evaluate(style) != plain.first.evaluate(style)
        _shot(page, "compare")

        # Resources and settings render (for the screenshots).
        page.goto(site.base + "/resources")
        assert page.locator("h1, h2").count() > 0
        _shot(page, "resources")
        page.goto(site.base + "/settings")
        assert page.locator("h1, h2").count() > 0
        _shot(page, "settings")
        assert not errors, errors
    finally:
        ctx.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
