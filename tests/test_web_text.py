"""Logs, notes, transcripts and times as a person sees them, in Debian's Chromium.

A real busybox run (through `orbit run`) prints ANSI colours and a progress bar drawn with
carriage returns; a hand-written run holds a big log (a line to find far outside the loaded
window, a 300 KB line); notes written with `orbit note` hold markdown, one of them hostile; a
Claude Code transcript under session/ holds markdown too. The server is started through
`orbit web`, and the browser logs in with the URL it prints. Screenshots `text-*.png`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from conftest import Orbit, _cleanup_containers
from docker_setup import BUSYBOX_IMAGE
from test_web_e2e import NEEDS_CHROMIUM, SCREENSHOTS, TIMEOUT_MS, WIDE, _free_port, _shot
from test_web_e2e import browser as browser  # the module's Chromium, for this module's site
from web_client import browser_fetch

from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = [NEEDS_CHROMIUM, pytest.mark.chromium]

BIG_LINES = 200_000  # about 9 MB: the page loads its last 64 KiB only
NEEDLE_LINE = 1234
NEEDLE = "needle: the checkpoint was written to /ckpt/best.pt"
LONG_LINE = 150_000  # a 300 KB line
HOSTILE_LINE = 7
HOSTILE_LOG = (
    '<img src=x onerror="window.pwned = 4"> \x1b]8;;javascript:window.pwned=5\x1b\\x\x1b]8;;\x1b\\'
)
MARKDOWN = (
    "Conclusion: **lr 0.1 wins**, see `train.py`.\n\n- seed 1 diverged\n- seed 2 fine\n\n"
    "[the paper](https://example.org/paper)"
)
HOSTILE = (
    '<script>window.pwned = 1</script> <img src=x onerror="window.pwned = 2"> '
    "[click me](javascript:window.pwned=3) [data](data:text/html,<script>1</script>) "
    "![pic](/static/x.png) **still bold**"
)
ASSISTANT = "Done: **loss 0.21**.\n\n1. ran `pytest`\n2. fixed the [bug](https://example.org/b)"
ASKED = datetime.now(UTC).replace(microsecond=0) - timedelta(days=3, hours=1)  # the user's turn
BUSYBOX_SCRIPT = (
    r"printf '\033[31mred error\033[0m plain\n'; "
    r"printf '\033[1;32mbold green\033[0m \033[38;5;208morange\033[0m\n'; "
    r"printf '\033]8;;javascript:alert(1)\033\\osc link\033]8;;\033\\ \033[2Kerased\n'; "
    r"for i in 1 2 3 4 5; do printf '\rtraining %d/5 |%s|' $i '#####'; sleep 0.2; done; "
    r"printf '\n'; echo finished"
)


def _part(page: Any, selector: str, name: str) -> None:
    """A screenshot of one part of the page (docs/web.md shows the log, the notes)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(selector).screenshot(path=str(SCREENSHOTS / f"{name}.png"))


@dataclass
class Site:
    orbit: Orbit
    login_url: str
    base: str
    colours: str  # the busybox run
    big: str  # the hand-written run with the big log


def _big_log() -> str:
    lines = [f"step {i} loss {1 / i:.6f}" for i in range(1, BIG_LINES + 1)]
    lines[NEEDLE_LINE - 1] = NEEDLE
    lines[LONG_LINE - 1] = "x" * 300_000
    lines[HOSTILE_LINE - 1] = HOSTILE_LOG
    return "\n".join(lines) + "\n"


def _turn(kind: str, text: str, at: str | None = None) -> str:
    content: Any = text if kind == "user" else [{"type": "text", "text": text}]
    line = {"type": kind, "sessionId": "s1", "message": {"role": kind, "content": content}}
    return json.dumps({**line, "timestamp": at} if at else line) + "\n"


def _transcript() -> str:
    return (
        _turn("user", "Train it, **quickly**.", ASKED.isoformat())
        + _turn("assistant", ASSISTANT, ASKED.isoformat())
        + _turn("assistant", HOSTILE)
    )


@pytest.fixture(scope="module")
def site(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("web-text")
    (root / "work").mkdir()
    orbit = Orbit(root / "home", root / "work")
    colours = orbit.submit(
        "--image", BUSYBOX_IMAGE, "--no-project", "-n", "colours", "-g", "text",
        "--", "sh", "-c", BUSYBOX_SCRIPT,
    )  # fmt: skip
    store = RunStore(Home.from_environ(orbit.environ))
    spec = {"name": "big", "group": "text", "image": "x", "command": ["train"]}
    run = store.create(spec, state=RunState.SUCCEEDED, reason="", actor="test")
    run.path("log.txt").write_text(_big_log())
    session = run.dir / "session"
    session.mkdir()
    (session / "s1.jsonl").write_text(_transcript())
    status = orbit.wait_for(colours, lambda s: bool(s.get("finished_at")), 60)
    assert status["state"] == "succeeded", status
    for text in (MARKDOWN, HOSTILE):
        assert orbit("note", colours, text).code == 0
    assert orbit("note", "-g", "text", "group: **seeds** matter").code == 0
    res = orbit("web", "--port", str(_free_port()), "--json")
    assert res.code == 0, res.err
    url = str(res.json()["url"])
    try:
        yield Site(orbit, url, url.split("/login", 1)[0], colours, run.id)
    finally:
        orbit("web", "--stop", "--json")
        _cleanup_containers(orbit.home)


@pytest.fixture
def page(site: Site, browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport=WIDE, timezone_id="Asia/Tokyo")
    ctx.set_default_timeout(TIMEOUT_MS)
    pg = ctx.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda exc: problems.append(str(exc)))
    pg.on("dialog", lambda d: (problems.append("dialog: " + d.message), d.dismiss()))
    fresh = site.orbit("web", "--json")
    assert fresh.code == 0, fresh.err
    pg.goto(str(fresh.json()["url"]))
    assert pg.url == site.base + "/"
    try:
        yield pg
        assert problems == []
    finally:
        ctx.close()


def test_colours_and_a_progress_bar_from_a_real_run(site: Site, page: Any) -> None:
    page.goto(f"{site.base}/runs/{site.colours}")
    log = page.locator("#log")
    red = log.locator("span.a-f1")
    assert red.inner_text() == "red error"
    assert red.evaluate("e => getComputedStyle(e).color") == "rgb(205, 49, 49)"
    assert log.locator("span.a-bold.a-f2").inner_text() == "bold green"
    orange = log.locator("span[style]", has_text="orange")
    assert orange.evaluate("e => getComputedStyle(e).color") == "rgb(255, 135, 0)"
    text = log.inner_text()
    assert "\x1b" not in text and "[31m" not in text and "]8;;" not in text
    assert log.locator("a:not(.ln)").count() == 0  # the OSC-8 link is text, not a link
    assert "osc link erased" in text
    bars = [line for line in text.split("\n") if "training" in line]
    assert bars == ["training 5/5 |#####|"], bars  # the bar once, at its last state
    assert "finished" in text
    numbers = log.locator("a.ln")
    assert numbers.first.get_attribute("href") == "#L1"
    assert "1" not in text.split("\n")[0]  # the number is not part of the copied text
    _part(page, "#logs", "text-log")


def test_a_bar_drawing_while_the_page_follows_shows_once(site: Site, page: Any) -> None:
    # Docker holds a line until its newline, so a busybox bar reaches log.txt whole (above);
    # here the log is written as a writer that passes pieces on would, while the page polls.
    store = RunStore(Home.from_environ(site.orbit.environ))
    spec = {"name": "live", "image": "x", "command": ["train"]}
    fields = {
        "started_at": datetime.now(UTC).isoformat(),
        "lease": {"cpus": 1.0, "mem_gb": 1.0, "gpus": []},
    }
    run = store.create(spec, state=RunState.RUNNING, reason="", actor="test", status_fields=fields)
    log_file = run.path("log.txt")
    log_file.write_text("start\n")
    shown = page.goto(f"{site.base}/runs/{run.id}")
    assert shown.status == 200, shown.text()[:3000]
    log = page.locator("#log")
    seen = set()
    for i in range(1, 6):
        with open(log_file, "a") as fh:
            fh.write(f"\rlive {i}/5")
        sync_api.expect(log).to_contain_text(f"live {i}/5")
        bars = [line for line in log.inner_text().split("\n") if "live" in line]
        assert bars == [f"live {i}/5"], bars  # one line, replaced in place
        seen.update(bars)
    with open(log_file, "a") as fh:
        fh.write("\nend\n")
    sync_api.expect(log).to_contain_text("end")
    assert [line.strip() for line in log.inner_text().split("\n") if line.strip()] == [
        "start",
        "live 5/5",
        "end",
    ]
    assert log.locator("#L2").inner_text().strip() == "live 5/5" and len(seen) == 5


def test_a_line_begun_before_the_window_is_joined_by_load_earlier(site: Site, page: Any) -> None:
    store = RunStore(Home.from_environ(site.orbit.environ))
    spec = {"name": "one long line", "image": "x", "command": ["train"]}
    run = store.create(spec, state=RunState.SUCCEEDED, reason="", actor="test")
    run.path("log.txt").write_text("first\n" + "z" * 100_000 + "\n")  # the page loads 64 KiB
    page.goto(f"{site.base}/runs/{run.id}")
    assert page.locator("#log .l").count() == 1 and page.locator("#L2").count() == 1
    page.click("#log-earlier")
    page.locator("#L1").wait_for(state="attached")
    long = page.locator("#L2")
    assert long.count() == 1
    while long.locator("button.show-all").count():  # one a piece: 34 and 64 KiB here
        long.locator("button.show-all").first.click()
    assert long.inner_text().strip() == "z" * 100_000


def test_search_finds_a_line_outside_the_window_and_jumps_to_it(site: Site, page: Any) -> None:
    page.goto(f"{site.base}/runs/{site.big}")
    assert page.locator(f"#L{BIG_LINES}").count() == 1  # the tail, numbered from the file
    assert page.locator(f"#L{NEEDLE_LINE}").count() == 0  # not loaded
    page.fill("#log-search", "CHECKPOINT was")  # case-insensitive, over the whole log
    results = page.locator("#log-results li")
    results.first.wait_for()
    assert results.count() == 1
    assert results.first.inner_text() == f"L{NEEDLE_LINE} {NEEDLE}"
    assert page.locator("#log-count").inner_text() == "1 matching line in the whole log"
    _part(page, "#logs", "text-log-search")
    with page.expect_response(lambda r: f"line={NEEDLE_LINE}" in r.url) as jumped:
        results.first.locator("a").click()
    assert jumped.value.status == 200, jumped.value.text()
    target = page.locator(f"#L{NEEDLE_LINE}")
    target.wait_for()
    assert target.inner_text().strip() == NEEDLE and "target" in str(target.get_attribute("class"))
    assert page.url.endswith(f"#L{NEEDLE_LINE}")
    box, view = target.bounding_box(), page.locator("#log").bounding_box()
    assert view["y"] <= box["y"] <= view["y"] + view["height"]  # scrolled into the log's view
    assert not page.locator("#log-follow").is_checked()
    last = int(str(page.locator("#log .l").last.get_attribute("id"))[1:])
    top = int(str(page.locator("#log .l").first.get_attribute("id"))[1:])
    page.click("#log-earlier")  # the lines before the window
    page.locator(f"#L{top - 1}").wait_for(state="attached")
    assert page.locator(f"#L{top}").count() == 1 and page.locator("#L1").count() == 1
    page.click("#log-later")  # the lines after the window, then back to the end
    page.locator(f"#L{last + 1}").wait_for(state="attached")
    assert page.locator(f"#L{NEEDLE_LINE}").count() == 1
    page.click("#log-end")
    page.locator(f"#L{BIG_LINES}").wait_for(state="attached")
    assert page.locator("#log-later").is_hidden()

    # A link to a line opens the log there; a 300 KB line is cut with "show all".
    page.goto(f"{site.base}/runs/{site.big}#L{LONG_LINE}")
    long = page.locator(f"#L{LONG_LINE}")
    long.wait_for()
    assert len(long.inner_text()) < 12_000
    long.locator("button.show-all").click()
    assert len(long.inner_text()) > 300_000
    page.goto(f"{site.base}/")
    page.goto(f"{site.base}/runs/{site.big}#L{NEEDLE_LINE + 1}")
    page.locator(f"#L{NEEDLE_LINE + 1}.target").wait_for()

    # Hostile text in the log stays text, in the log and in the search results.
    page.fill("#log-search", "onerror")
    page.locator("#log-results li").first.wait_for()
    first = page.locator("#log-results li").first.inner_text()
    assert first == f'L{HOSTILE_LINE} <img src=x onerror="window.pwned = 4"> x'
    page.locator("#log-results li a").first.click()
    hostile = page.locator(f"#L{HOSTILE_LINE}.target")
    hostile.wait_for()
    assert hostile.locator("img, a:not(.ln)").count() == 0
    assert page.evaluate("window.pwned") is None
    api = f"{site.base}/api/runs/{site.big}/log"
    for url, status in (
        (f"{api}/search", 400),
        (f"{api}/search?q=x&from=two", 400),
        (f"{api}/search?q=" + "x" * 1001, 400),
        (f"{api}?line=999999999", 404),
        (f"{site.base}/api/runs/999/log/search?q=x", 404),
    ):
        answer = browser_fetch(page, url)
        assert answer.status == status and "error" in answer.json(), url


def test_markdown_in_notes_and_transcripts_and_nothing_hostile_runs(site: Site, page: Any) -> None:
    page.goto(f"{site.base}/runs/{site.colours}#notes")
    notes = page.locator("#notes .note-text")
    good = notes.nth(0)
    assert good.locator("strong").inner_text() == "lr 0.1 wins"
    assert good.locator("code").inner_text() == "train.py"
    assert good.locator("li").count() == 2
    assert good.locator("a").get_attribute("href") == "https://example.org/paper"
    bad = notes.nth(1)
    assert bad.locator("script, img, iframe").count() == 0
    assert bad.locator("a").count() == 0  # javascript: and data: links stay text
    assert "<script>window.pwned = 1</script>" in bad.inner_text()
    assert bad.locator("strong").inner_text() == "still bold"
    group = page.locator("#notes .group-note .note-text strong")
    assert group.inner_text() == "seeds"
    _part(page, "#notes", "text-notes")
    page.goto(f"{site.base}/lessons?group=text")
    assert page.locator("#lessons-notes .note-text strong").first.inner_text() == "seeds"

    page.goto(f"{site.base}/runs/{site.big}/conversation/s1.jsonl")
    turns = page.locator("#conversation .turn .text")
    assert turns.nth(0).locator("strong").inner_text() == "quickly"
    reply = turns.nth(1)
    assert reply.locator("strong").inner_text() == "loss 0.21"
    assert reply.locator("ol li").count() == 2 and reply.locator("code").inner_text() == "pytest"
    assert reply.locator("a").get_attribute("href") == "https://example.org/b"
    assert turns.nth(2).locator("script, img, a").count() == 0
    when = page.locator("#conversation .turn .who time").first
    tokyo = ASKED.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%Y-%m-%d %H:%M")
    assert when.inner_text() == f"{tokyo} · 3 days ago"
    _shot(page, "text-conversation")
    assert page.evaluate("window.pwned") is None


def test_times_are_local_with_their_age(site: Site, page: Any) -> None:
    page.goto(f"{site.base}/runs/{site.colours}")
    submitted = page.locator("#overview time").first
    iso = str(submitted.get_attribute("datetime"))
    tokyo = datetime.fromisoformat(iso).astimezone(ZoneInfo("Asia/Tokyo"))
    shown = submitted.inner_text()
    assert shown.startswith(tokyo.strftime("%H:%M")) or tokyo.strftime("%Y-%m-%d %H:%M") in shown
    assert shown.endswith(" ago") or shown.endswith("just now"), shown
    assert "GMT+9" in str(submitted.get_attribute("title"))
    for where in ("/", f"/runs/{site.colours}", "/lessons?group=text"):
        page.goto(site.base + where)
        times = page.locator("time[datetime]")
        assert times.count() > 0, where
        assert page.locator("time[datetime]:not(.localised)").count() == 0, where
        assert "+00:00" not in page.locator("main").inner_text(), where
