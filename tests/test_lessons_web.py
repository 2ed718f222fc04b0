"""The lessons page and the group notes on the run page, in a real headless Chromium, over the
realistic lr × seed sweep; /api/lessons is the digest `orbit lessons --json` gives."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import Orbit
from review_sweep import lr_sweep, project
from test_web_e2e import CHROMIUM, CHROMIUM_ARGS, NEEDS_CHROMIUM

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = NEEDS_CHROMIUM
TIMEOUT_MS = 10_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _api(base: str, path: str, token: str) -> tuple[int, Any]:
    req = urllib.request.Request(base + path, headers={"X-Orbit-Token": token})
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
            finally:
                browser.close()
    finally:
        assert orbit("web", "--stop").code == 0
