"""The charts (uPlot, orbit/web/static/charts.js) in a real headless Chromium driven by Playwright.

One home with a real busybox run (Docker through `orbit run`, writing step, time, loss and acc)
and hand-written ones: values that are huge, tiny, infinite or NaN; values at and below zero
(for the log scale); 40 keys (more than a screen); a running run the test appends to; a group
of 50 runs × 3 metrics (10 settings × 5 seeds). The server is started with `orbit web`, the
browser logs in with the URL it prints. What each chart draws is read from the uPlot objects the
page exposes (`window.orbitCharts`), never from pixels.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from conftest import Orbit, _cleanup_containers
from docker_setup import BUSYBOX_IMAGE
from test_web_e2e import NEEDS_CHROMIUM, _free_port, _shot
from test_web_e2e import browser as browser  # the fixture: one Chromium for the module

from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore

TIMEOUT_MS = 15_000
WIDE = {"width": 1280, "height": 900}
GROUP_RUNS, SEEDS = 50, 5  # 10 settings of 5 seeds
HOSTILE = '<img src=x onerror="window.pwned=1">'  # a metric key

# (test_web_e2e skips the module without playwright)
pytestmark = [NEEDS_CHROMIUM, pytest.mark.chromium]


@dataclass
class Site:
    orbit: Orbit
    base: str
    docker: str  # busybox: 20 steps of loss, acc and time
    weird: str  # 3.2e18 constant, 1e-300 tiny, ±1e308, NaN and Infinity lines
    signs: str  # values from -5 to 14: some at or below zero
    wide: str  # 40 keys
    live: str  # running; the test appends lines
    extra: list[str]  # 12 more runs for a compare of more than 10


def _run(store: RunStore, name: str, state: RunState = RunState.SUCCEEDED, **spec: Any) -> Any:
    base = {
        "name": name,
        "image": "python:3.12-slim",
        "command": ["python", "train.py"],
        "resources": {"cpus": 1.0, "mem_gb": 1.0, "gpus": 0},
    }
    base.update(spec)
    fields = {"lease": {"cpus": 1.0, "mem_gb": 1.0, "gpus": []}}
    return store.create(base, state=state, reason="", actor="test", status_fields=fields)


def _write(run: Any, lines: list[str]) -> None:
    with open(run.path("metrics.jsonl"), "a") as fh:
        fh.write("".join(line + "\n" for line in lines))


def _group(store: RunStore) -> None:
    for i in range(GROUP_RUNS):
        lr, seed = 0.1 * (1 + i // SEEDS), i % SEEDS
        run = _run(store, f"sweep-{i}", group="sweep", params={"lr": lr, "seed": seed})
        _write(
            run,
            [
                json.dumps(
                    {
                        "step": s,
                        "loss": lr / (1 + s / 200) + 0.01 * seed,
                        "acc": 1 - 1 / (1 + s / 200) - 0.01 * seed * lr,
                        "grad_norm": lr * (1 + math.sin(s / 300 + seed)),
                    }
                )
                for s in range(1, 2001)
            ],
        )


@pytest.fixture(scope="module")
def site(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("web-charts")
    (root / "work").mkdir()
    orbit = Orbit(root / "home", root / "work")
    script = (
        "for i in $(seq 1 20); do "
        'echo "{\\"step\\": $i, \\"time\\": $(( 1700000000 + i * 60 )), '
        '\\"loss\\": $(( 100 / i )), \\"acc\\": $(( i * 5 ))}" >> "$ORBIT_METRICS"; done'
    )
    docker = orbit.submit(
        "--image", BUSYBOX_IMAGE, "--no-project", "--cpus", "0.5", "--mem", "0.25",
        "-n", "busybox-metrics", "--", "sh", "-c", script,
    )  # fmt: skip
    store = RunStore(Home.from_environ(orbit.environ))
    weird = _run(store, "weird")
    _write(
        weird,
        [
            f'{{"step": {s}, "flops": 3.2e18, "tiny": {s}e-300, '
            f'"wide": {"-" if s % 2 else ""}1e308, "odd": {("NaN", "Infinity", s)[s % 3]}}}'
            for s in range(1, 31)
        ],
    )
    signs = _run(store, "signs")
    _write(signs, [json.dumps({"step": s, "v": s - 6, HOSTILE: 1}) for s in range(1, 21)])
    wide = _run(store, "wide")
    _write(
        wide, [json.dumps({"step": s, **{f"k{k:02d}": k * s for k in range(40)}}) for s in (1, 3)]
    )
    live = _run(store, "live", RunState.RUNNING)
    _write(live, [json.dumps({"step": s, "loss": 1 / s}) for s in range(1, 11)])
    extra = []
    for i in range(12):
        run = _run(store, f"extra-{i}", params={"lr": i})  # 12 settings: no bands
        _write(run, [json.dumps({"step": s, "loss": (i + 1) / s}) for s in range(1, 11)])
        extra.append(run.id)
    _group(store)
    status = orbit.wait_for(docker, lambda s: bool(s.get("finished_at")), 60)
    assert status["state"] == "succeeded", status
    res = orbit("web", "--port", str(_free_port()), "--json")
    assert res.code == 0, res.err
    url = urlsplit(str(res.json()["url"]))
    try:
        yield Site(orbit, f"{url.scheme}://{url.netloc}", docker, weird.id, signs.id, wide.id,
                   live.id, extra)  # fmt: skip
    finally:
        orbit("web", "--stop", "--json")
        _cleanup_containers(orbit.home)


@pytest.fixture
def page(site: Site, browser: Any) -> Iterator[Any]:
    """A logged-in page; any script error fails the test."""
    ctx = browser.new_context(viewport=WIDE)
    ctx.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    try:
        p = ctx.new_page()
        p.on("pageerror", lambda exc: errors.append(f"{exc}: {exc.stack}"))
        p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        res = site.orbit("web", "--json")
        assert res.code == 0, res.err
        p.goto(str(res.json()["url"]))
        assert "/login" not in p.url
        yield p
        assert errors == []
    finally:
        ctx.close()


def _open(page: Any, url: str, loads: int = 1) -> None:
    page.goto(url)
    page.wait_for_function(f"() => (window.orbitCharts && window.orbitCharts.loads) >= {loads}")


def _js(key: str, what: str) -> str:
    """A function of the page returning `what`, a JS expression of `u` (the uPlot object of
    `key`'s chart; null before it is drawn)."""
    k = json.dumps(key)
    return f"() => {{ const u = window.orbitCharts.figures[{k}].plot; return u && ({what}); }}"


def _plot(page: Any, key: str, what: str) -> Any:
    """`what` (see _js) once the chart is drawn."""
    page.locator(f'figure.metric[data-key="{key}"]').scroll_into_view_if_needed()
    page.wait_for_function(_js(key, "true"))
    return page.evaluate(_js(key, what))


def _until(page: Any, key: str, what: str, timeout: int = TIMEOUT_MS) -> None:
    """Wait until `what` (see _js) holds."""
    page.wait_for_function(_js(key, what), timeout=timeout)


def _over(page: Any, key: str) -> dict[str, float]:
    box = page.locator(f'figure.metric[data-key="{key}"] .u-over').bounding_box()
    assert box is not None
    return dict(box)


def test_a_real_run_is_charted_and_hover_shows_its_values(site: Site, page: Any) -> None:
    _open(page, f"{site.base}/runs/{site.docker}")
    keys = page.evaluate("() => window.orbitCharts.data().keys")
    assert sorted(keys) == ["acc", "loss", "time"]
    for key in keys:
        assert page.locator(f'figure.metric[data-key="{key}"] canvas').count() == 1
        assert _plot(page, key, "u.data[0].length") == 20
    assert _plot(page, "loss", "u.data[1]") == [100 // i for i in range(1, 21)]
    # The pointer at the middle of the plot: the legend shows the step and the value there.
    box = _over(page, "loss")
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.3)
    idx = _plot(page, "loss", "u.cursor.idx")
    assert idx is not None
    legend = page.locator('figure.metric[data-key="loss"] .u-legend .u-value').all_inner_texts()
    assert legend == [str(idx + 1), str(100 // (idx + 1))], (idx, legend)
    _shot(page, "charts-run")


def test_smoothing_and_log_scale_change_what_is_drawn_and_the_url(site: Site, page: Any) -> None:
    _open(page, f"{site.base}/runs/{site.signs}")
    raw = _plot(page, "v", "u.data[1]")
    assert raw == [s - 6 for s in range(1, 21)]
    page.locator("#chart-log").check()
    _until(page, "v", "u.scales.y.distr === 3")
    drawn = _plot(page, "v", "u.data[1]")
    assert drawn == [None] * 6 + list(range(1, 15))  # 0 and below: gaps on a log scale
    assert page.locator('figure.metric[data-key="v"]').get_attribute("data-hidden") == "6"
    assert "logy=1" in page.url
    page.locator("#chart-log").uncheck()
    page.locator("#chart-smooth").fill("0.9")
    _until(page, "v", "u.series.length === 3")
    series = _plot(page, "v", "[u.data[1], u.data[2], u.series.map(s => s.label)]")
    assert series[0] == raw  # the raw line kept (faint), the smoothed one beside it
    assert series[1] != raw and series[1][0] == pytest.approx(raw[0])
    assert series[1][-1] < raw[-1]  # an average lags behind a rising line
    assert "smooth=0.9" in page.url
    # The URL is the view: opened again, it draws the same.
    _open(page, page.url)
    assert page.locator("#chart-smooth").input_value() == "0.9"
    assert _plot(page, "v", "u.series.length") == 3


def test_drag_zooms_and_double_click_resets(site: Site, page: Any) -> None:
    _open(page, f"{site.base}/runs/{site.docker}")
    full = _plot(page, "loss", "[u.scales.x.min, u.scales.x.max]")
    box = _over(page, "loss")
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.2, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=5)
    page.mouse.up()
    zoomed = _plot(page, "loss", "[u.scales.x.min, u.scales.x.max]")
    assert full[0] < zoomed[0] < zoomed[1] < full[1], (full, zoomed)
    page.mouse.dblclick(box["x"] + box["width"] * 0.5, y)
    assert _plot(page, "loss", "[u.scales.x.min, u.scales.x.max]") == full


def test_the_x_axis_choice_fetches_the_series_again(site: Site, page: Any) -> None:
    _open(page, f"{site.base}/runs/{site.docker}")
    choices = page.locator("#chart-x option").all_inner_texts()
    assert choices[:4] == ["step", "time", "relative time", "line"] and "acc" in choices
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/api/series" in r.url else None)
    page.select_option("#chart-x", "time")
    page.wait_for_function("() => window.orbitCharts.loads >= 2")
    assert any("x=time" in u for u in asked), asked
    assert "x=time" in page.url
    xs = _plot(page, "loss", "u.data[0]")
    assert xs == [1700000000 + i * 60 for i in range(1, 21)]
    assert _plot(page, "loss", "u.scales.x.time") is True  # epoch seconds: a date axis
    assert "step" in page.evaluate("() => window.orbitCharts.data().keys")
    page.select_option("#chart-x", "acc")
    page.wait_for_function("() => window.orbitCharts.loads >= 3")
    assert _plot(page, "loss", "u.data[0]") == [i * 5 for i in range(1, 21)]
    page.select_option("#chart-x", label="relative time")  # seconds since the run's start
    page.wait_for_function("() => window.orbitCharts.loads >= 4")
    assert _plot(page, "loss", "[u.data[0], u.scales.x.time]") == [
        [i * 60 for i in range(20)],
        False,
    ]
    assert "x=reltime" in page.url and asked[-1].endswith("x=time")


def test_huge_tiny_infinite_and_nan_values_render(site: Site, page: Any) -> None:
    _open(page, f"{site.base}/runs/{site.weird}")
    keys = page.evaluate("() => window.orbitCharts.data().keys")
    assert sorted(keys) == ["flops", "odd", "tiny", "wide"]
    for key in keys:
        assert _plot(page, key, "u.data[0].length") > 0
        rng = _plot(page, key, "[u.scales.y.min, u.scales.y.max]")
        assert all(v is not None and math.isfinite(v) for v in rng), (key, rng)
        assert page.locator(f'figure.metric[data-key="{key}"] canvas').count() == 1
    assert _plot(page, "odd", "u.data[1]") == list(range(2, 31, 3))  # no NaN, no inf
    assert _plot(page, "flops", "u.scales.y.min < 3.2e18 && u.scales.y.max > 3.2e18") is True
    wide = page.locator('figure.metric[data-key="wide"]')
    assert wide.get_attribute("data-scale") == "asinh"  # a span beyond a float's range
    _shot(page, "charts-extremes")
    page.locator("#chart-log").check()
    _until(page, "tiny", "u.scales.y.distr === 3")
    assert _plot(page, "tiny", "u.scales.y.min > 0 && u.scales.y.min <= 1e-300") is True


def test_every_key_is_charted_as_it_scrolls_in_and_the_filter_narrows(
    site: Site, page: Any
) -> None:
    page.set_viewport_size({"width": 1280, "height": 700})
    _open(page, f"{site.base}/runs/{site.wide}")
    figures = page.locator("#charts figure.metric")
    assert figures.count() == 40  # no cap of 32
    drawn = page.evaluate(
        "() => Object.values(window.orbitCharts.figures).filter(f => f.plot).length"
    )
    assert 0 < drawn < 40  # the ones in view (and a little below), not all
    figures.last.scroll_into_view_if_needed()
    _until(page, "k39", "true")
    page.fill("#chart-filter", "k0")
    assert page.locator("#charts figure.metric:visible").count() == 10
    assert "keys=k0" in page.url
    page.select_option("#chart-size", "l")
    _until(page, "k00", "u.height === 400")
    width = _plot(page, "k00", "u.width")
    assert width > 900  # one chart a row, as wide as its container
    page.set_viewport_size({"width": 900, "height": 700})
    _until(page, "k00", "u.width < 900")


def test_a_group_chart_overlays_50_runs_with_a_band_per_setting_under_1_mb(
    site: Site, page: Any
) -> None:
    sizes: list[tuple[str, int]] = []
    page.on("requestfinished", lambda r: sizes.append((r.url, r.sizes()["responseBodySize"])))
    _open(page, f"{site.base}/compare?group=sweep")
    page.wait_for_load_state("networkidle")
    total = sum(n for _, n in sizes)
    print(f"group chart of 50 runs x 3 metrics: {total} bytes in {len(sizes)} responses")
    assert total < 1_000_000, sizes
    keys = page.evaluate("() => window.orbitCharts.data().keys")
    assert sorted(keys) == ["acc", "grad_norm", "loss"]
    for key in keys:
        labels = _plot(page, key, "u.series.map(s => s.label)")
        assert len(labels) == 1 + GROUP_RUNS + 3 * (GROUP_RUNS // SEEDS)
        assert _plot(page, key, "u.bands.length") == GROUP_RUNS // SEEDS
    # The band of the first setting (lr=0.1) is its 5 seeds' mean ± std at each x.
    data = page.evaluate("() => window.orbitCharts.data().settings[0]")
    assert data["label"] == "lr=0.1" and len(data["runs"]) == SEEDS
    xs, mean, lo, hi = data["bands"]["loss"]
    i = xs.index(1.0)
    seeds = [0.1 / (1 + 1 / 200) + 0.01 * s for s in range(SEEDS)]
    m = sum(seeds) / SEEDS
    sd = (sum((v - m) ** 2 for v in seeds) / (SEEDS - 1)) ** 0.5
    assert (mean[i], lo[i], hi[i]) == pytest.approx((m, m - sd, m + sd), rel=1e-6)
    assert page.locator("#chart-bands-label").is_visible()
    page.locator("#chart-bands").uncheck()
    _until(page, "loss", "u.bands.length === 0")
    page.locator("#chart-bands").check()
    _until(page, "loss", "u.bands.length === 10")
    _shot(page, "charts-group")


def test_compare_takes_more_than_ten_runs(site: Site, page: Any) -> None:
    ids = ",".join(site.extra)
    _open(page, f"{site.base}/compare?ids={ids}")
    assert _plot(page, "loss", "u.series.length") == 1 + 12
    assert len(page.locator("p.legend a").all()) == 12
    _shot(page, "charts-compare")


def test_a_live_run_appends_only_the_new_points(site: Site, page: Any) -> None:
    run = RunStore(Home.from_environ(site.orbit.environ)).load(site.live)
    _open(page, f"{site.base}/runs/{site.live}")
    assert _plot(page, "loss", "u.data[0].length") == 10
    _write(run, [json.dumps({"step": s, "loss": 1 / s}) for s in range(11, 16)])
    _until(page, "loss", "u.data[0].length === 15", timeout=20_000)
    polls = page.evaluate("() => window.orbitCharts.polls")
    assert polls and all("since=" in p["url"] for p in polls)
    print(f"live poll: {max(p['bytes'] for p in polls)} bytes at most ({len(polls)} polls)")
    assert max(p["bytes"] for p in polls) < 1500, polls  # 5 points, not the whole series
    assert _plot(page, "loss", "u.data[0].slice(-5)") == [11, 12, 13, 14, 15]
    before = time.monotonic()
    _write(run, [json.dumps({"step": 16, "loss": 1 / 16, "new_key": 1.5})])
    page.wait_for_selector('figure.metric[data-key="new_key"] canvas', timeout=20_000)
    assert time.monotonic() - before < 20


def test_a_key_with_markup_is_shown_as_text(site: Site, page: Any) -> None:
    _open(page, f"{site.base}/runs/{site.signs}")
    key = json.dumps(HOSTILE)
    page.wait_for_function(f"() => window.orbitCharts.figures[{key}].plot")
    fig = page.evaluate(
        f"() => {{ const f = window.orbitCharts.figures[{key}].fig;"
        " return [f.querySelector('figcaption b').textContent, f.querySelectorAll('img').length]; }"
    )
    assert fig == [HOSTILE, 0]
    assert page.locator("#charts img").count() == 0
    assert page.evaluate("() => window.pwned === undefined")
