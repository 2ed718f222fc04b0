"""The run page's agent sessions and the conversation view, in Debian's Chromium.

A real busybox run made through `orbit run`; then, as the agents inside it would, the test
writes into its session/ a Claude Code transcript, a Codex rollout (YYYY/MM/DD/), a long
transcript of several pages, an empty one, a binary one and one whose last line is cut. The
server is started through `orbit web`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Orbit, _cleanup_containers
from docker_setup import BUSYBOX_IMAGE
from test_web_e2e import (
    CHROMIUM,
    CHROMIUM_ARGS,
    NEEDS_CHROMIUM,
    TIMEOUT_MS,
    WIDE,
    _free_port,
    _shot,
)
from transcripts import SESSION, THREAD, XSS, claude_lines, codex_lines
from web_client import browser_fetch

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = [NEEDS_CHROMIUM, pytest.mark.chromium]

ROLLOUT = f"2026/11/30/rollout-2026-11-30T10-00-00-{THREAD}.jsonl"
LONG = "long/agent.jsonl"
LONG_LINES = 450  # three pages of 200 lines
ODD = [
    b"\xff\xfe not utf-8", b"[1, 2]", b"{" * 3000 + b"}" * 3000, codex_lines()[0].encode(),
    json.dumps({"type": "user", "message": {"content": [None, 3, {"type": "new"}]}}).encode(),
    json.dumps({"type": "assistant", "message": {"content": [{"type": "tool_use", "input": 1}]}})
    .encode(),
    json.dumps({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Edit",
                "input": {"file_path": 3, "old_string": "a", "new_string": "<b>"}}]}}).encode(),
    json.dumps({"type": "result", "total_cost_usd": "free", "usage": [1]}).encode(),
    json.dumps({"type": "system", "subtype": {"a": 1}, "content": [{"x": 1}]}).encode(),
]  # fmt: skip


@dataclass
class Site:
    orbit: Orbit
    base: str
    run_id: str
    session: Path


def _long_transcript() -> str:
    out = []
    for i in range(LONG_LINES):
        msg = {"role": "user", "content": f"turn number {i}"}
        out.append(json.dumps({"type": "user", "sessionId": "long", "message": msg}))
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def site(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("conversation-e2e")
    (root / "work").mkdir()
    orbit = Orbit(root / "home", root / "work")
    run_id = orbit.submit(
        "--image", BUSYBOX_IMAGE, "--no-project", "-n", "agent-run", "--", "sh", "-c",
        "echo the agent trained; echo 0.1 > $ORBIT_OUTPUT/lr.txt",
    )  # fmt: skip
    status = orbit.wait_for(run_id, lambda s: bool(s.get("finished_at")), 60)
    assert status["state"] == "succeeded", status
    session = orbit.run_dir(run_id) / "session"
    session.mkdir(exist_ok=True)
    (session / f"{SESSION}.jsonl").write_text("\n".join(claude_lines()) + "\n")
    (session / ROLLOUT).parent.mkdir(parents=True)
    (session / ROLLOUT).write_text("\n".join(codex_lines()) + "\n")
    (session / LONG).parent.mkdir()
    (session / LONG).write_text(_long_transcript())
    (session / "empty.jsonl").write_text("")
    (session / "binary.jsonl").write_bytes(b"\x00\x01\x02" * 100)
    (session / "cut.jsonl").write_text(claude_lines()[2] + '\n{"type": "assistant", "mess')
    (session / "odd.jsonl").write_bytes(b"\n".join(ODD) + b"\n")
    outside = root / "outside.jsonl"
    outside.write_text(claude_lines()[2] + "\n")
    (session / "link.jsonl").symlink_to(outside)
    res = orbit("web", "--port", str(_free_port()), "--json")
    assert res.code == 0, res.err
    url = str(res.json()["url"])
    try:
        yield Site(orbit, url.split("/login", 1)[0], run_id, session)
    finally:
        stopped = orbit("web", "--stop", "--json")
        _cleanup_containers(orbit.home)
        assert stopped.code == 0, stopped


@pytest.fixture
def page(site: Site) -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        ctx = browser.new_context(viewport=WIDE)
        ctx.set_default_timeout(TIMEOUT_MS)
        pg = ctx.new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda exc: errors.append(str(exc)))
        pg.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        pg.on("dialog", lambda d: (errors.append("dialog: " + d.message), d.dismiss()))
        login = site.orbit("web", "--json")
        assert login.code == 0, login.err
        pg.goto(str(login.json()["url"]))
        try:
            yield pg
            assert errors == []
        finally:
            browser.close()


def _conv_url(site: Site, rel: str, offset: int | None = None) -> str:
    tail = "" if offset is None else f"?offset={offset}"
    return f"{site.base}/runs/{site.run_id}/conversation/{rel}{tail}"


def test_run_page_lists_the_transcripts_and_a_conversation_renders(site: Site, page: Any) -> None:
    page.goto(f"{site.base}/runs/{site.run_id}#session")
    rows = page.locator("#transcripts tr").all_inner_texts()[1:]
    by_name = {r.split("\t")[0]: r.split("\t")[1:] for r in rows}
    assert set(by_name) == {
        f"{SESSION}.jsonl",
        ROLLOUT,
        LONG,
        "empty.jsonl",
        "binary.jsonl",
        "cut.jsonl",
        "odd.jsonl",
    }  # not the link
    assert by_name[f"{SESSION}.jsonl"][1:] == ["Claude Code", "15"]
    assert by_name[ROLLOUT][1:] == ["Codex", "4"]

    page.click(f'#transcripts a:text("{SESSION}.jsonl")')
    page.wait_for_url(f"**/conversation/{SESSION}.jsonl")
    head = page.locator("#conv-head").inner_text()
    assert "Claude Code 2.1.332" in head and "claude-sonnet-4-5" in head
    assert "183 output" in page.locator("#conv-usage").inner_text()
    conv = page.locator("#conversation")
    # The payload is text: no script ran, no image was made of it.
    assert XSS in conv.locator(".turn.user").first.inner_text()
    assert page.evaluate("window.pwned") is None
    assert conv.locator("img").count() == 0 and conv.locator("script").count() == 0
    # A tool call is collapsed until clicked; its failing result shows then.
    bash = conv.locator("details.tool", has_text="python train.py --steps 20")
    assert bash.get_attribute("open") is None
    assert not bash.locator("pre.result").is_visible()
    bash.locator("summary").click()
    assert bash.get_attribute("open") is not None
    assert "ValueError: bad" in bash.locator("pre.result").inner_text()
    assert "tool-error" in (bash.get_attribute("class") or "")
    # A file edit shows its diff, coloured.
    edit = conv.locator("details.tool.edit", has_text="Edit").first
    assert edit.locator("pre.diff span.del").first.inner_text() == "-lr = 1.0"
    assert edit.locator("pre.diff span.add").first.inner_text() == "+lr = 0.1"
    color = edit.locator("pre.diff span.add").first.evaluate("e => getComputedStyle(e).color")
    assert color == "rgb(17, 99, 41)"
    assert conv.locator("details.raw").count() == 2
    # "e" expands everything.
    page.keyboard.press("e")
    assert conv.locator("details:not([open])").count() == 0

    _shot(page, "conversation")
    page.goto(_conv_url(site, ROLLOUT))
    assert "Codex 0.171.0" in page.locator("#conv-head").inner_text()
    assert "9.3k total" in page.locator("#conv-usage").inner_text()
    patch = page.locator("#conversation details.tool.edit", has_text="apply_patch")
    assert patch.locator("span.add").all_inner_texts() == ["+lr = 0.1", "+lr 0.1 works"]
    assert page.evaluate("window.pwned") is None
    _shot(page, "conversation-codex")


def test_paging_a_long_transcript(site: Site, page: Any) -> None:
    page.goto(_conv_url(site, LONG))
    turns = page.locator("#conversation .turn.user .text")
    assert turns.count() == 200 and turns.first.inner_text().strip() == "turn number 0"
    assert page.locator("#conv-prev").count() == 0
    page.click("#conv-next")
    page.wait_for_url("**offset=*")
    assert turns.first.inner_text().strip() == "turn number 200"
    page.keyboard.press("]")  # the next page by key
    sync_api.expect(turns).to_have_count(50)
    assert turns.last.inner_text().strip() == f"turn number {LONG_LINES - 1}"
    assert page.locator("#conv-next").count() == 0
    page.click("#conv-prev")
    sync_api.expect(turns).to_have_count(200)
    assert turns.first.inner_text().strip() == "turn number 200"
    page.click("#conv-first")
    page.wait_for_url("**offset=0")
    assert turns.first.inner_text().strip() == "turn number 0"
    page.click("#conv-last")
    page.wait_for_url(lambda url: not url.endswith("offset=0"))
    assert turns.last.inner_text().strip() == f"turn number {LONG_LINES - 1}"


def test_odd_files_give_a_page_or_a_4xx(site: Site, page: Any) -> None:
    def get(rel: str, offset: str = "") -> Any:
        url = _conv_url(site, rel) + (f"?offset={offset}" if offset else "")
        return browser_fetch(page, url)

    empty = get("empty.jsonl")
    assert empty.status == 200 and "This transcript is empty" in empty.text()
    binary = get("binary.jsonl")
    assert binary.status == 200 and "A binary file" in binary.text()
    odd = get("odd.jsonl")
    assert odd.status == 200 and "a line not understood" in odd.text()
    cut = get("cut.jsonl")
    assert cut.status == 200 and "a line not understood" in cut.text()
    assert get("gone.jsonl").status == 404
    assert get("long").status == 404  # a folder
    assert get("link.jsonl").status in (403, 404) and "turn number" not in get("link.jsonl").text()
    assert get("..%2Flog.txt").status in (403, 404)
    assert get(LONG, "abc").status == 400
    assert get(LONG, "99999999999").status == 200
    assert get(LONG, "-5").status == 200
    assert get(LONG, "17").status == 200  # mid-line: the first line is shown raw
    os.unlink(site.session / "empty.jsonl")
    assert get("empty.jsonl").status == 404
    shutil.rmtree(site.session)
    run_page = browser_fetch(page, f"{site.base}/runs/{site.run_id}")
    assert run_page.status == 200 and "No agent session" in run_page.text()
    assert get(f"{SESSION}.jsonl").status == 404
