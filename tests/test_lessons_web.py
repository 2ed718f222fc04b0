"""The lessons page, a group's settings and the group notes on the run page, in a real headless
Chromium: over the realistic lr × seed sweep (real containers), and over a group of the agent
trial's shape (tests/review_sweep.py trial_group); /api/lessons is the digest `orbit lessons
--json` gives, /api/compare?group=G the ranking of `orbit best --by-params --json`."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import Orbit
from review_sweep import lr_sweep, project, trial_group
from test_web_e2e import CHROMIUM, CHROMIUM_ARGS, NEEDS_CHROMIUM
from web_client import loopback

from orbit.store.home import Home
from orbit.store.runs import RunStore

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = [NEEDS_CHROMIUM, pytest.mark.chromium]
TIMEOUT_MS = 10_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _api(base: str, path: str, token: str) -> tuple[int, Any]:
    url, host = loopback(base + path)  # Python cannot resolve the secret `*.localhost` name
    req = urllib.request.Request(url, headers={"X-Orbit-Token": token, **host})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_lessons_page(orbit: Orbit, python_image: str, tmp_path: Path) -> None:
    swept = lr_sweep(orbit, python_image, project(tmp_path))
    orbit.environ["ORBIT_AUTHOR"] = "ada"
    assert orbit("note", "-g", "lrs", "lr=1 wins on average").code == 0
    started = orbit("web", "--port", str(_free_port()), "--json")
    assert started.code == 0, started.err
    login_url = str(started.json()["url"])
    base = login_url.split("/login", 1)[0]
    token = (orbit.home / "web-token").read_text().strip()
    try:
        status, data = _api(base, "/api/lessons?group=lrs", token)
        assert status == 200, data
        cli = orbit("lessons", "-g", "lrs", "--json").json()
        assert {k: v for k, v in data.items() if k != "cache"} == {
            k: v for k, v in cli.items() if k != "cache"
        }
        assert _api(base, "/api/lessons?group=nope", token)[0] == 404
        assert _api(base, "/api/lessons", token)[0] == 400
        status, ranked = _api(base, "/api/compare?group=lrs", token)
        assert status == 200, ranked
        assert ranked == orbit("best", "-g", "lrs", "--by-params", "--json").json()
        assert [s["params"] for s in ranked["settings"]] == [
            {"lr": "1"},
            {"lr": "0.1"},
            {"lr": "50"},
        ]

        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.set_default_timeout(TIMEOUT_MS)
                page.goto(login_url)
                page.goto(base + "/lessons?group=lrs")
                assert page.locator("h1").inner_text() == "Lessons of group lrs"
                assert (
                    "9 runs: 6 succeeded, 3 failed."
                    in page.locator("#lessons-summary").inner_text()
                )
                best = page.locator("#lessons-settings tr.best").inner_text()
                assert "lr=1" in best and "0.12" in best and "3 of 3" in best
                diverged = page.locator("#lessons-settings tr", has_text="lr=50").inner_text()
                assert "0 of 3" in diverged
                assert "lr=1 wins on average" in page.locator("#lessons-notes").inner_text()
                assert "lr=50" in page.locator("#lessons-failures").inner_text()
                page.click(f"#lessons-best-run a[href='/runs/{swept[('0.1', '2')]}']")
                page.wait_for_url(f"**/runs/{swept[('0.1', '2')]}")
                # The run page shows the group's note, with a link back to the lessons.
                assert "lr=1 wins on average" in page.locator("#notes .group-note").inner_text()
                page.click("#group-notes a")
                page.wait_for_url("**/lessons?group=lrs")
                page.locator("#lessons-summary a", has_text="every setting ranked").click()
                page.wait_for_url("**/compare?group=lrs")
                best = page.locator("#settings tr.best").inner_text()
                assert "lr=1" in best and "0.12 ± 0.01" in best and "3/3" in best
            finally:
                browser.close()
    finally:
        assert orbit("web", "--stop").code == 0


def test_a_groups_review_in_the_browser(orbit: Orbit) -> None:
    """From any page to a group's lessons and settings, and another metric asked for there."""
    swept = trial_group(RunStore(Home.from_environ(orbit.environ)))
    started = orbit("web", "--port", str(_free_port()), "--json")
    assert started.code == 0, started.err
    login_url = str(started.json()["url"])
    base = login_url.split("/login", 1)[0]
    picked = "Ranked by the final acc, highest is better (picked, direction by its name)"
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.set_default_timeout(TIMEOUT_MS)
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.goto(login_url)
                # The top bar's Lessons, with no group: the groups to choose from.
                page.click("#nav-lessons")
                page.wait_for_url(base + "/lessons")
                page.locator("#lessons-groups a", has_text="nb").first.click()
                page.wait_for_url("**/lessons?group=nb")
                assert page.locator("#objective").inner_text() == picked
                first = page.locator("#lessons-settings tbody tr").first
                assert "alpha=1" in first.inner_text() and "best" in first.get_attribute("class")
                # The control: another metric, the direction left to its name.
                page.select_option("#objective-control select[name=metric]", "loss")
                page.click("#objective-control button[type=submit]")
                page.wait_for_url("**metric=loss**")
                way = "lowest is better (given, direction by its name)"
                assert page.locator("#objective").inner_text() == f"Ranked by the final loss, {way}"
                assert "alpha=5" in page.locator("#lessons-settings tr.best").inner_text()

                # From the runs list: a row's group, then the group's settings.
                page.goto(base + "/")
                page.click(f'tr.run[data-id="{swept[("1", "1")]}"] td.col-group a')
                page.wait_for_url("**/?group=nb")
                assert page.locator("#nav-lessons").get_attribute("href") == "/lessons?group=nb"
                page.locator("#group-links a", has_text="every setting ranked").click()
                page.wait_for_url("**/compare?group=nb")
                assert page.locator("#objective").inner_text() == picked
                rows = page.locator("#settings tbody tr")
                texts = rows.all_inner_texts()
                assert [t.split("\t")[2] for t in texts] == [
                    "alpha=1", "alpha=5", "alpha=0.1", "alpha=50"
                ]  # fmt: skip
                best = page.locator("#settings tr.best")
                assert best.count() == 1 and "0.92 ± 0.01" in best.inner_text()
                style = "el => getComputedStyle(el.querySelector('td')).backgroundColor"
                assert best.evaluate(style) != rows.nth(1).evaluate(style)  # it looks marked
                page.select_option("#objective-control select[name=order]", "min")
                page.click("#objective-control button[type=submit]")
                page.wait_for_url("**order=min**")
                assert "goes against its name" in page.locator(".objective .warning").inner_text()
                assert "alpha=0.1" in page.locator("#settings tr.best").inner_text()
                # Its best run opens its page; 1 opens the first run shown side by side.
                page.goto(base + "/compare?group=nb")
                page.click(f'#settings tr.best a[href="/runs/{swept[("1", "3")]}"]')
                page.wait_for_url(f"**/runs/{swept[('1', '3')]}")
                page.go_back()
                page.keyboard.press("1")
                page.wait_for_url(f"**/runs/{swept[('1', '3')]}")
                assert not errors, errors
            finally:
                browser.close()
    finally:
        assert orbit("web", "--stop").code == 0
