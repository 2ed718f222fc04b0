"""Bounded metrics parsing: work linear in the file whatever it holds (a new key per line, 100k
distinct keys, 200 KB key names, a 20 MB line), one parse per file shared by concurrent
readers, a reader with a deadline answered with a preview and a note while the rest is read in
the background, and no metrics value (huge, tiny, infinite, NaN, not a number) that gives a
page other than 200 through the real server, or JSON that a strict parser refuses."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from test_web_security import Live, _run_dir, live, make_run

from orbit.review import parse, sample, series
from orbit.review.series import Follower, read_metrics

__all__ = ["live"]  # the fixture, imported from test_web_security


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    series._cache.clear()
    yield
    _settle()
    series._cache.clear()


def _settle(timeout: float = 60) -> None:
    """Wait for every background read to end."""
    end = time.monotonic() + timeout
    while any(e.background for e in list(series._cache.values())):
        assert time.monotonic() < end, "a background read did not end"
        time.sleep(0.05)


def _entry(path: Path) -> Any:
    return next(e for k, e in series._cache.items() if k[0] == str(path))


def _write(path: Path, rows: list[dict[str, Any]] | Iterator[dict[str, Any]]) -> None:
    with open(path, "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)


def _new_key_lines(n: int) -> Iterator[dict[str, Any]]:
    """The common logging bug: a key of its own on every line."""
    for i in range(n):
        yield {"step": i, "loss": 1 / (i + 1), f"sample_{i}_loss": 0.5}


def _work(path: Path) -> int:
    series._cache.clear()
    read_metrics(path, max_points=0)
    return int(_entry(path).state.work)


# --- linear in the file ----------------------------------------------------------------------
def test_lines_that_each_add_a_key_cost_work_linear_in_their_number(tmp_path: Path) -> None:
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    _write(small, _new_key_lines(5000))
    _write(big, _new_key_lines(20_000))
    w_small, w_big = _work(small), _work(big)
    # Values looked at: 4 times the lines, about 4 times the work (it was 16 times: a column
    # over the whole block for every new key, before the key cap applied).
    assert w_big / w_small < 5, (w_small, w_big)
    assert w_big < (parse.MAX_KEYS + 4) * 20_000  # a column per charted key at most
    got = read_metrics(big)
    assert list(got.series)[:2] == ["loss", "sample_0_loss"] and len(got.series) == parse.MAX_KEYS
    assert got.dropped_keys == parse.MAX_DROPPED  # the names past that are not kept
    assert got.series["loss"].count == 20_000


def test_a_hundred_thousand_distinct_keys_keep_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    with open(path, "w") as fh:  # 100k keys: 1,000 lines of 100 new keys each
        for i in range(1000):
            fh.write(json.dumps({"step": i, **{f"k{i}_{j}": j for j in range(100)}}) + "\n")
    work = _work(path)
    got = read_metrics(path, max_points=0)
    assert len(got.series) == parse.MAX_KEYS and got.dropped_keys == parse.MAX_DROPPED
    assert work < 5 * 100_000  # every value seen a few times at most, not once per key


def test_keys_of_200_kb_and_a_20_mb_line_are_counted_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    with open(path, "w") as fh:
        fh.write(json.dumps({"step": 0, "loss": 1.0}) + "\n")
        for i in range(40):  # 40 keys of 200 KB
            fh.write(json.dumps({"step": i + 1, f"{i}" + "k" * 200_000: 1.0, "loss": 0.5}) + "\n")
        fh.write(json.dumps({"step": 41, "x": "y" * 20_000_000}) + "\n")  # one 20 MB line
        fh.write(json.dumps({"step": 42, "loss": 0.25}) + "\n")
    got = read_metrics(path)
    assert list(got.series) == ["loss"] and got.series["loss"].count == 42
    assert (got.dropped_keys, got.lines, got.series["loss"].last) == (40, 43, 0.25)
    assert _entry(path).state.work < 1000  # the 20 MB line was never parsed
    # The shepherd's sidecar, with a budget smaller than that line, gets past it too.
    follower = Follower(path)
    for _ in range(40):
        if follower.update(budget=1 << 20):
            break
    assert follower.state is not None and follower.state.offset == path.stat().st_size
    series._cache.clear()
    assert read_metrics(path).to_json() == got.to_json()  # from that sidecar: the same
    assert _entry(path).state.from_sidecar == path.stat().st_size


def test_a_line_longer_than_the_limit_counts_as_a_line(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    long = {"loss": 5.0, "pad": "p" * (parse.MAX_LINE_BYTES + 10)}
    _write(path, [{"loss": 1.0}, long, {"loss": 3.0}])
    s = read_metrics(path).series["loss"]
    assert (s.x, s.y) == ([1.0, 3.0], [1.0, 3.0])  # the line-numbered x axis stays right


# --- one parse per file -------------------------------------------------------------------------
def test_two_threads_reading_one_file_share_one_parse(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _write(path, ({"step": i, "loss": 1 / (i + 1), "acc": i % 7} for i in range(300_000)))
    alone = _work(path)
    series._cache.clear()
    start = threading.Barrier(2)
    got: list[Any] = []

    def reader() -> None:
        start.wait()
        got.append(read_metrics(path))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0] is got[1]  # the waiter got the parse's own result
    assert _entry(path).state.work == alone  # parsed once


# --- a deadline: a preview, then the whole file ------------------------------------------------
def test_a_big_file_past_the_deadline_is_previewed_then_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    n = 300_000
    _write(path, ({"step": i, "loss": 2.0 - i / n} for i in range(n)))
    assert path.stat().st_size > series.SAMPLE_ABOVE
    first = read_metrics(path, deadline=time.monotonic())  # no time at all
    assert not first.complete and "sample" in first.note and "being read" in first.note
    s = first.series["loss"]
    assert s.x[0] == 0 and s.x[-1] == n - 1 and s.last == 2.0 - (n - 1) / n  # the whole run
    assert _entry(path).background and _entry(path).preview is not None
    again = read_metrics(path, deadline=time.monotonic() + 5)  # while it reads: the preview
    assert again.series["loss"].x == s.x
    _settle()
    done = read_metrics(path, deadline=time.monotonic() + 5)
    assert done.complete and not done.note
    series._cache.clear()
    assert done.to_json() == read_metrics(path).to_json()
    assert done.series["loss"].count == n


def test_a_parse_cut_by_the_deadline_shows_the_lines_read_so_far(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _write(path, ({"step": i, "loss": 1.0} for i in range(100)))
    read_metrics(path)  # cached: what comes next is an append
    with open(path, "a") as fh:
        fh.writelines(json.dumps({"step": i, "loss": 0.5}) + "\n" for i in range(100, 50_000))
    cut = read_metrics(path, deadline=time.monotonic() - 1)
    assert not cut.complete and "the first" in cut.note, cut.note
    assert cut.series["loss"].count == 100
    _settle()
    assert read_metrics(path, deadline=time.monotonic() + 5).series["loss"].count == 50_000


def test_a_preview_reads_a_bounded_part_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _write(path, ({"step": i, "loss": i} for i in range(300_000)))
    with open(path, "rb") as fh:
        state, n = sample.sample(fh, 0, path.stat().st_size)
    assert 0 < n <= sample.PIECES * sample.PIECE_BYTES
    assert state.work < 2 * n // 10  # values looked at: a few per line read, ~20 bytes each


def test_x_key_charts_against_a_chosen_key(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _write(path, ({"step": i, "epoch": i // 10, "loss": 1 / (i + 1)} for i in range(100)))
    default = read_metrics(path)
    assert default.x_label == "step" and default.x_keys == ["step", "epoch", "loss"]
    by_epoch = read_metrics(path, x_key="epoch")
    assert by_epoch.x_label == "epoch" and "epoch" not in by_epoch.series
    assert by_epoch.series["loss"].x[-1] == 9 and by_epoch.series["step"].y[-1] == 99


# --- hostile values, through the real server ----------------------------------------------------
HOSTILE = (
    '{"step": 3, "total_flops": 3.2e18}\n'  # one huge point: the axis had no span
    '{"step": 4, "tiny": 1e-300, "wide": -1e308, "bad": NaN, "up": Infinity}\n'
    '{"step": 5, "tiny": 2e-300, "wide": 1e308, "bad": -Infinity, "up": "fast"}\n'
    '{"step": 6, "nested": {"a": [1, 2]}, "flag": true, "big": 1' + "0" * 400 + "}\n"
    '{"step": 7, "loss": 0.5, "flag": false, "wide": 1.7976931348623157e308}\n'
    '{"step": 8, "wide": 1.7976931348623157e308}\n'  # a sum of two overflows
)


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.slow
def test_every_hostile_value_gives_pages_and_strict_json(live: Live) -> None:
    hostile, plain = make_run(live.home, "hostile"), make_run(live.home, "plain")
    (_run_dir(live.home, hostile) / "metrics.jsonl").write_text(HOSTILE)
    (_run_dir(live.home, plain) / "metrics.jsonl").write_text('{"step": 1, "loss": 2}\n')
    pages = [f"/runs/{hostile}", f"/api/series?ids={hostile},{plain}",
             f"/compare?ids={hostile},{plain}", f"/compare?ids={plain},{hostile}", "/",
             f"/api/runs?ids={hostile}"]  # fmt: skip
    for path in pages:
        reply = live.request(path, token=live.token)
        assert reply.status == 200, (path, reply.text[-300:])
    assert "3.2e+18" in live.request(f"/runs/{hostile}", token=live.token).text
    strict = (f"/api/runs/{hostile}/metrics", f"/api/compare?ids={hostile},{plain}",
              f"/api/series?ids={hostile},{plain}")  # fmt: skip
    for path in strict:
        reply = live.request(path, token=live.token)
        assert reply.status == 200, (path, reply.text[-300:])
        _strict_json(reply.text)
    got = _strict_json(live.request(f"/api/runs/{hostile}/metrics", token=live.token).text)
    assert set(got["series"]) == {"total_flops", "tiny", "wide", "loss"}
    assert got["series"]["wide"]["max"] == 1.7976931348623157e308 and got["complete"] is True


@pytest.mark.slow
def test_eight_readers_of_a_new_key_per_line_file_and_the_list_meanwhile(live: Live) -> None:
    run_id = make_run(live.home, "keys")
    _write(_run_dir(live.home, run_id) / "metrics.jsonl", _new_key_lines(5000))
    replies: list[Any] = []

    def view() -> None:
        replies.append(live.request(f"/runs/{run_id}", token=live.token))

    threads = [threading.Thread(target=view) for _ in range(8)]
    for t in threads:
        t.start()
    listing = live.request("/api/runs", token=live.token)
    for t in threads:
        t.join()
    assert listing.status == 200
    assert [r.status for r in replies] == [200] * 8
    assert all("sample_0_loss" in r.text for r in replies)


# --- what a person sees -------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.chromium
def test_a_big_file_shows_a_preview_and_a_note_then_everything(live: Live) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    from test_web_e2e import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, WIDE

    run_id = make_run(live.home, "big")
    n = 200_000
    rows = ({"step": i, "loss": 2 * math.exp(-i / 50_000), "acc": i / n} for i in range(n))
    _write(_run_dir(live.home, run_id) / "metrics.jsonl", rows)
    hostile = make_run(live.home, "hostile")
    (_run_dir(live.home, hostile) / "metrics.jsonl").write_text(HOSTILE)
    url = urlsplit(live.login_url())
    base = f"{url.scheme}://{url.netloc}"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport=WIDE).new_page()
            page.goto(url.geturl())
            page.goto(f"{base}/runs/{run_id}")
            note = page.locator("#metrics-note")
            assert "sample" in note.inner_text() and "being read" in note.inner_text()
            assert page.locator("#charts figure.metric").count() == 2
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.locator("#metrics").screenshot(path=str(SCREENSHOTS / "parse-preview.png"))
            for _ in range(100):  # the background reads the rest: a reload has all of it
                time.sleep(0.2)
                page.reload()
                if page.locator("#metrics-note").count() == 0:
                    break
            assert page.locator("#metrics-note").count() == 0
            assert f"{n:,}" in page.locator("#metrics").inner_text() or str(n) in page.content()
            page.goto(f"{base}/runs/{hostile}")
            page.wait_for_function("() => window.orbitCharts && window.orbitCharts.loads >= 1")
            assert page.locator("#charts figure.metric").count() == 4
            assert "3.2e+18" in page.locator("#metrics").inner_text()
            page.locator("#metrics").screenshot(path=str(SCREENSHOTS / "parse-hostile.png"))
        finally:
            browser.close()
