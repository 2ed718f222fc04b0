"""The runs table for sweeps (web/table.py, web/listing.py, review/where.py) in a real Chromium.

One home: a real `orbit sweep` of six busybox runs (lr × seed, each writing metrics, one of them
failing) and fourteen hand-written runs of another group (params, metrics with the shepherd's
metrics.summary.json, a tag, one with a hostile name, note and metric key). The server is
started with `orbit web`; the browser logs in with the URL it prints. Screenshots `table-*.png`
(ORBIT_SCREENSHOTS=docs/screenshots refreshes docs/web.md's).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import Orbit, _cleanup_containers, stop_ticker
from docker_setup import BUSYBOX_IMAGE
from test_polish import SMALL
from test_web_e2e import CHROMIUM, CHROMIUM_ARGS, NEEDS_CHROMIUM, SCREENSHOTS, WIDE, _free_port

from orbit.errors import ExitCode
from orbit.review.series import Follower
from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = [NEEDS_CHROMIUM, pytest.mark.chromium]

TIMEOUT_MS = 15_000
# loss = 1000·lr/step + seed, falling over 10 steps: final 100·lr + seed, max 1000·lr + seed.
# lr=4 with seed=2 exits 3 after its metrics.
SCRIPT = (
    "for i in $(seq 1 10); do "
    'echo "{\\"step\\": $i, \\"loss\\": $(( 1000 * {lr} / i + {seed} )), '
    '\\"acc\\": $(( i * {lr} ))}" >> "$ORBIT_METRICS"; done; '
    '[ "{lr}{seed}" = "42" ] && exit 3; echo done'
)
LONG = "x" * 3000


@dataclass
class Site:
    orbit: Orbit
    base: str  # scheme://host:port of the printed login URL
    sweep: dict[str, str]  # name (lr{lr}-s{seed}) -> id
    bulk: list[str]  # the hand-written runs, oldest first
    hostile: str  # the hand-written run with a 3,000-character name, note and metric key


def _bulk_run(store: RunStore, i: int, name: str, key: str = "acc") -> str:
    spec = {
        "name": name,
        "group": "bulk",
        "tags": {"baseline": "yes"} if i < 3 else {},
        "params": {"opt": "sgd" if i % 2 else "adam", "lr": f"{(i + 1) / 1000:g}"},
        "image": "python:3.12-slim",
        "command": ["python", "train.py"],
        "resources": {"cpus": 1.0, "mem_gb": 1.0, "gpus": 0},
    }
    fields = {"exit_code": 0, "started_at": "2026-11-30T06:00:00.000+00:00"}
    run = store.create(
        spec, state=RunState.SUCCEEDED, reason="", actor="test", status_fields=fields
    )
    path = run.path("metrics.jsonl")
    with open(path, "w") as fh:
        for step in range(1, 21):
            fh.write(json.dumps({"step": step, "loss": (i + 1) / step, key: step * i}) + "\n")
    Follower(path).update()  # the shepherd's metrics.summary.json, as a real run has
    return run.id


@pytest.fixture(scope="module")
def site(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("web-table")
    orbit = Orbit(root / "home", root)  # --no-project: no working tree is read
    try:
        res = orbit(
            "sweep", "--image", BUSYBOX_IMAGE, *SMALL, "-g", "sw", "-n", "lr{lr}-s{seed}",
            "-p", "lr=1,2,4", "-p", "seed=1,2",
            "-w", "--json", "--", "sh", "-c", SCRIPT,
        )  # fmt: skip
        assert res.code == ExitCode.RUN_FAILED, res.err  # lr4-s2 fails
        sweep = {r["name"]: str(r["id"]) for r in res.json()["runs"]}
        store = RunStore(Home.from_environ(orbit.environ))
        bulk = [_bulk_run(store, i, f"bulk-{i:02d}") for i in range(13)]
        hostile = _bulk_run(store, 13, "hostile-" + LONG, key="k" + LONG)
        assert orbit("note", hostile, "note " + LONG).code == 0
        started = orbit("web", "--port", str(_free_port()), "--json")
        assert started.code == 0, started.err
        url = urlsplit(str(started.json()["url"]))
        yield Site(orbit, f"{url.scheme}://{url.netloc}", sweep, [*bulk, hostile], hostile)
        assert orbit("web", "--stop", "--json").code == 0
    finally:
        stop_ticker(orbit.home)
        _cleanup_containers(orbit.home)


@pytest.fixture
def page(site: Site) -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            ctx = browser.new_context(viewport=WIDE)
            ctx.set_default_timeout(TIMEOUT_MS)
            pg = ctx.new_page()
            errors: list[str] = []
            pg.on("pageerror", lambda exc: errors.append(str(exc)))
            pg.goto(str(site.orbit("web", "--json").json()["url"]))
            yield pg
            assert not errors, errors
        finally:
            browser.close()


def _rows(page: Any) -> list[str]:
    return [str(r.get_attribute("data-id")) for r in page.locator("tr.run").all()]


def _cells(page: Any, col: str) -> list[str]:
    return [str(t) for t in page.locator(f'tr.run td[data-col="{col}"]').all_inner_texts()]


def _heads(page: Any) -> list[str]:
    """The sweep columns' ids, in order."""
    return list(
        page.locator("table.runs th[data-col]").evaluate_all("hs => hs.map(h => h.dataset.col)")
    )


def _shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def _ids(site: Site, *names: str) -> list[str]:
    return [site.sweep[n] for n in names]


def test_params_and_metrics_are_sortable_columns(site: Site, page: Any) -> None:
    page.goto(site.base + "/?group=sw")
    assert _heads(page) == ["param:lr", "param:seed"]  # one column per param key of the shown runs
    assert page.locator("th.params").count() == 0  # no text blob any more
    assert sorted(_cells(page, "param:lr")) == ["1", "1", "2", "2", "4", "4"]

    # Sort by a param: the header's link, then again for the other direction.
    page.click('th[data-col="param:lr"] a')
    page.wait_for_url("**sort=param%3Alr**")
    assert _cells(page, "param:lr") == ["4", "4", "2", "2", "1", "1"]
    page.click('th[data-col="param:lr"] a')
    page.wait_for_url("**desc=0**")
    assert _cells(page, "param:lr") == ["1", "1", "2", "2", "4", "4"]

    # Choose metrics in the chooser (loss, with its min and max), then sort by the final loss.
    page.click("details#columns summary")
    page.check('#metric-chooser input[value="loss"]')
    page.check('#stat-chooser input[value="min"]')
    page.check('#stat-chooser input[value="max"]')
    page.click("details#columns button[type=submit]")
    page.wait_for_url("**metric=loss**")
    assert _heads(page) == ["param:lr", "param:seed", "final:loss", "min:loss", "max:loss"]
    assert page.locator("th.metric").count() == 0  # the main-metric column gives way
    page.click('th[data-col="final:loss"] a')
    page.wait_for_url("**sort=final%3Aloss**")
    assert _cells(page, "final:loss") == ["402", "401", "202", "201", "102", "101"]
    assert _rows(page) == _ids(site, "lr4-s2", "lr4-s1", "lr2-s2", "lr2-s1", "lr1-s2", "lr1-s1")
    assert _cells(page, "max:loss")[0] == "4002" and _cells(page, "min:loss")[0] == "402"
    page.click('th[data-col="max:loss"] a')
    page.wait_for_url("**sort=max%3Aloss**")
    assert _cells(page, "max:loss") == ["4002", "4001", "2002", "2001", "1002", "1001"]
    _shot(page, "table-columns")
    page.click("th.reason a")  # the fixed columns sort too, reason among them
    page.wait_for_url("**sort=reason**")
    assert _rows(page)[0] == site.sweep["lr4-s2"]  # the one with a reason, descending


@pytest.mark.parametrize(
    ("where", "names"),
    [
        ("lr<3 loss<150", ["lr1-s2", "lr1-s1"]),  # a param and a metric (its final value)
        ("state=failed", ["lr4-s2"]),
        ("seed=2 max:loss>=2000", ["lr4-s2", "lr2-s2"]),
        ("name~LR2", ["lr2-s2", "lr2-s1"]),
        ("lr=1,4 seed!=1", ["lr4-s2", "lr1-s2"]),
    ],
)
def test_filter_expressions(site: Site, page: Any, where: str, names: list[str]) -> None:
    page.goto(site.base + "/?group=sw")
    page.fill("#where", where)
    page.press("#where", "Enter")
    page.wait_for_url("**where=**")
    assert _rows(page) == _ids(site, *names)
    assert page.locator("#where-error").count() == 0
    assert page.input_value("#where") == where


def test_expressions_combine_with_the_search_and_tags(site: Site, page: Any) -> None:
    page.goto(site.base + "/")
    page.fill("#where", "tag:baseline opt=sgd")
    page.press("#where", "Enter")
    page.wait_for_url("**where=**")
    assert _rows(page) == [site.bulk[1]]  # runs 0-2 are tagged; of those, 1 is sgd
    page.fill("#where", "lr<=0.005 loss>=0.15")
    page.fill("#search", "bulk-0")
    page.press("#search", "Enter")
    page.wait_for_url("**q=bulk-0**")
    assert _rows(page) == [site.bulk[4], site.bulk[3], site.bulk[2]]  # final loss (i+1)/20


def test_a_bad_expression_says_why_on_the_page(site: Site, page: Any) -> None:
    page.goto(site.base + "/?group=sw")
    page.fill("#where", "lr<<3")
    with page.expect_navigation() as nav:
        page.press("#where", "Enter")
    assert nav.value.status == 400
    message = page.locator("#where-error").inner_text()
    assert message == (
        "bad filter term 'lr<<3': '<' needs a number, not '<3': the expression is not applied."
    )
    assert page.input_value("#where") == "lr<<3"  # kept, to be fixed
    assert len(_rows(page)) == 6  # the other filters still apply
    _shot(page, "table-where-error")
    page.goto(site.base + '/?where=name="open')
    assert "No closing quotation" in page.locator("#where-error").inner_text()


def test_select_twelve_runs_and_compare_them(site: Site, page: Any) -> None:
    page.goto(site.base + "/?sort=id&desc=0")
    chosen = [*site.sweep.values(), *site.bulk[:6]]
    assert len(chosen) == 12
    for run_id in chosen[:11]:
        page.check(f'tr.run[data-id="{run_id}"] input[name=ids]')
    # The 12th by keyboard: j to its row, x to tick it.
    page.locator("body").click(position={"x": 5, "y": 5})
    for _ in range(_rows(page).index(chosen[11]) + 1):
        page.keyboard.press("j")
    page.keyboard.press("x")
    assert page.locator("#selected-count").inner_text() == "12 selected"
    assert parse_qs(urlsplit(page.url).query)["sel"] == [",".join(chosen)]
    # The selection survives a new sort (its link carries sel=).
    page.click('th a:text-is("name")')
    page.wait_for_url("**sort=name**")
    assert sorted(page.locator("tr.run input[name=ids]:checked").evaluate_all(
        "bs => bs.map(b => b.value)"
    )) == sorted(chosen)  # fmt: skip
    page.keyboard.press("c")
    page.wait_for_url("**/compare?ids=**")
    ids = parse_qs(urlsplit(page.url).query)["ids"][0].split(",")
    assert ids == chosen
    assert page.locator("main").inner_text().count("lr") > 0
    for run_id in chosen:
        assert page.locator(f'a[href="/runs/{run_id}"]').count() >= 1, run_id
    _shot(page, "table-compare-12")


def test_select_all_shown_by_key_and_checkbox(site: Site, page: Any) -> None:
    page.goto(site.base + "/?group=sw")
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("a")
    assert page.locator("#selected-count").inner_text() == "6 selected"
    page.keyboard.press("a")
    assert page.locator("#selected-count").inner_text() == ""
    page.check("#select-all")
    assert page.locator("#selected-count").inner_text() == "6 selected"
    page.keyboard.press("?")
    keys = page.locator("#keys").inner_text()
    assert "select all shown runs" in keys and "edit the filter expression" in keys
    page.keyboard.press("Escape")
    page.keyboard.press("w")
    assert page.evaluate("document.activeElement.id") == "where"


def test_the_url_reproduces_the_view(site: Site, page: Any) -> None:
    page.goto(site.base + "/")
    page.fill("input[name=group]", "sw")
    page.fill("#where", "loss>101")
    page.click("details#columns summary")
    page.check('#metric-chooser input[value="acc"]')
    page.check('#stat-chooser input[value="max"]')
    page.uncheck('#stat-chooser input[value="final"]')
    page.check('#param-chooser input[value="seed"]')
    page.click("form.filters button[type=submit] >> nth=0")
    page.wait_for_url("**where=**")
    page.click('th[data-col="max:acc"] a')
    page.wait_for_url("**sort=max%3Aacc**")
    first = _rows(page)[:2]
    for run_id in first:
        page.check(f'tr.run[data-id="{run_id}"] input[name=ids]')
    shared = page.url
    view = (_rows(page), _cells(page, "max:acc"), _cells(page, "param:seed"))
    assert view[0] == _ids(site, "lr4-s2", "lr4-s1", "lr2-s2", "lr2-s1", "lr1-s2")
    assert view[1] == ["40", "40", "20", "20", "10"] and view[2] == ["2", "1", "2", "1", "2"]

    other = page.context.new_page()  # a colleague opens the shared URL
    other.goto(shared)
    assert (_rows(other), _cells(other, "max:acc"), _cells(other, "param:seed")) == view
    assert _heads(other) == ["param:seed", "max:acc"]
    assert other.input_value("#where") == "loss>101"
    checked = other.locator("tr.run input[name=ids]:checked").evaluate_all(
        "bs => bs.map(b => b.value)"
    )
    assert checked == first and other.locator("#selected-count").inner_text() == "2 selected"
    other.close()


def test_long_text_never_blows_up_a_row(site: Site, page: Any) -> None:
    page.goto(site.base + "/?group=bulk&metric=k" + LONG + "&metric=loss&groupby=1")
    heights = page.locator("tr.run").evaluate_all(
        "rs => rs.map(r => r.getBoundingClientRect().height)"
    )
    assert len(heights) == 14 and max(heights) - min(heights) < 2, heights
    row = page.locator(f'tr.run[data-id="{site.hostile}"]')
    assert row.locator("td.name").get_attribute("title") == "hostile-" + LONG
    assert row.locator("td.notes").get_attribute("title") == "note " + LONG
    head = page.locator(f'th[data-col="final:k{LONG}"]')
    assert head.bounding_box()["height"] < 40
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDE["width"]
    _shot(page, "table-long-text")
