"""The bench pages in a real headless Chromium: the jobs list, a job's task × method matrix
whose links open the trials' run pages, two jobs compared, a broken trial file shown as such,
and no console error on any of them.

Two jobs and their trials are written through orbit/bench/model.py; the solve and verify runs
the trials name are real busybox runs made by `orbit run`. The server is started and stopped
through `orbit web`, as in test_web_e2e.py.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import SMALL, Orbit, _cleanup_containers
from docker_setup import BUSYBOX_IMAGE
from test_bench_compare import job, trial
from test_web_e2e import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, WIDE, _free_port, _shot
from web_client import Fetched, browser_fetch

from orbit.bench.model import job_dir
from orbit.store.home import Home

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(
        not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)),
        reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)",
    ),
]


@dataclass
class Bench:
    orbit: Orbit
    base: str
    runs: dict[str, str]  # "solve"/"verify" of hello × oracle seed 1


def _busybox(orbit: Orbit, name: str, script: str) -> str:
    return orbit.submit("--image", BUSYBOX_IMAGE, *SMALL, "-n", name, "--", "sh", "-c", script)


@pytest.fixture(scope="module")
def bench(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    root = tmp_path_factory.mktemp("bench-web")
    (root / "work").mkdir()
    orbit = Orbit(root / "home", root / "work")
    solve = _busybox(orbit, "hello__oracle__1.solve", "echo hello > /tmp/out; echo solved")
    verify = _busybox(orbit, "hello__oracle__1.verify-1", "echo 1 > /tmp/reward.txt; echo ok")
    for run_id in (solve, verify):
        orbit.wait_for(run_id, lambda s: bool(s.get("finished_at")), 60)
    home = Home.from_environ(orbit.environ)
    job(home, "j1", ["hello", "sum", "<b>bold</b>"], ["oracle", "empty"], name="smoke", seeds=2)
    for seed in (1, 2):
        runs = {"solve_run": solve, "verify_runs": [verify]} if seed == 1 else {}
        trial(home, "j1", "hello", "oracle", seed, 1.0, **runs)
        trial(home, "j1", "hello", "empty", seed, 0.0)
        trial(home, "j1", "sum", "oracle", seed, 1.0)
        trial(home, "j1", "<b>bold</b>", "oracle", seed, 0.5)
    trial(home, "j1", "sum", "empty", 1, reason="no reward file (<script>alert(1)</script>)",
          solve_run=solve)  # fmt: skip
    trial(home, "j1", "sum", "empty", 2, phase="verifying", evaluation="unknown")
    (job_dir(home, "j1") / "trials" / "cut__empty__9.json").write_text('{"id": "cut", "ta')
    job(home, "j2", ["hello", "sum"], ["oracle"], name="again")
    trial(home, "j2", "hello", "oracle", 1, 0.0)
    trial(home, "j2", "sum", "oracle", 1, 1.0)
    (job_dir(home, "j3")).mkdir(parents=True)
    (job_dir(home, "j3") / "job.json").write_text("{not json")
    res = orbit("web", "--port", str(_free_port()), "--json")
    assert res.code == 0, res.err
    url = str(res.json()["url"])
    try:
        yield Bench(orbit, url.split("/login", 1)[0], {"solve": solve, "verify": verify})
    finally:
        orbit("web", "--stop", "--json")
        _cleanup_containers(orbit.home)


@pytest.fixture
def page(bench: Bench) -> Iterator[tuple[Any, list[str]]]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        ctx = browser.new_context(viewport=WIDE)
        ctx.set_default_timeout(TIMEOUT_MS)
        pg = ctx.new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda exc: errors.append(str(exc)))
        pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        pg.on("dialog", lambda d: errors.append("dialog: " + d.message))
        fresh = bench.orbit("web", "--json")
        pg.goto(str(fresh.json()["url"]))
        try:
            yield pg, errors
        finally:
            browser.close()


def test_jobs_list_matrix_links_and_comparison(bench: Bench, page: tuple[Any, list[str]]) -> None:
    pg, errors = page
    pg.click("nav a[href='/bench']")
    pg.wait_for_url("**/bench")
    rows = pg.locator("tr.job")
    assert [r.get_attribute("data-id") for r in rows.all()] == ["j2", "j1"]
    j1 = pg.locator("tr.job[data-id=j1]")
    assert j1.locator(".valid").inner_text() == "8"
    assert j1.locator(".invalid").inner_text() == "1 + 1 unreadable"
    broken_job = pg.locator("li[data-id=j3]").inner_text()
    assert broken_job.startswith("job j3: job.json cannot be read")
    assert str(bench.orbit.home) not in pg.content()
    _shot(pg, "bench-jobs")

    # The matrix of j1: scores over seeds, an invalid trial's reason on expand, run links.
    pg.click("tr.job[data-id=j1] a[href='/bench/jobs/j1']")
    pg.wait_for_url("**/bench/jobs/j1")
    cell = pg.locator("tr.task[data-task=hello] td[data-method=oracle]")
    assert cell.locator(".score").inner_text() == "1 ± 0 (n=2)"
    sum_empty = pg.locator("tr.task[data-task=sum] td[data-method=empty]")
    assert sum_empty.locator(".score").inner_text() == "invalid ×1, 1 pending"
    why = sum_empty.locator("details.why")
    assert not why.locator(".reason").is_visible()
    why.locator("summary").click()
    assert why.locator(".reason").inner_text() == "no reward file (<script>alert(1)</script>)"
    title = sum_empty.locator("li.ev-invalid").get_attribute("title")
    assert title == "no reward file (<script>alert(1)</script>)"
    assert pg.locator("tr.task[data-task='<b>bold</b>'] th").inner_text() == "<b>bold</b>"
    unreadable = pg.locator("li.unreadable-trial").inner_text()
    assert unreadable.startswith("Unreadable trial file cut__empty__9.json: not JSON")
    assert pg.locator("#paired-summary").inner_text().startswith("Over 1 of 3 tasks")
    left = pg.locator("ul.left-out li").all_inner_texts()
    assert left == ["sum: empty: 1 invalid (no reward file (<script>alert(1)</script>))",
                    "<b>bold</b>: empty: not run"]  # fmt: skip
    assert pg.locator("tr[data-method=oracle] .paired-mean").inner_text() == "1"
    _shot(pg, "bench-job")

    solve, verify = bench.runs["solve"], bench.runs["verify"]
    pg.click(f"tr.task[data-task=hello] td[data-method=oracle] a.solve[href='/runs/{solve}']")
    pg.wait_for_url(f"**/runs/{solve}")
    assert pg.locator("#run-state").inner_text() == "succeeded"
    assert "solved" in pg.locator("#log").inner_text()
    pg.go_back()
    pg.click(f"tr.task[data-task=hello] td[data-method=oracle] a.verify[href='/runs/{verify}']")
    pg.wait_for_url(f"**/runs/{verify}")
    assert "ok" in pg.locator("#log").inner_text()

    # Compare j1 and j2 from the list: the shared names are qualified by job.
    pg.goto(bench.base + "/bench")
    pg.check("tr.job[data-id=j1] input[name=jobs]")
    pg.check("tr.job[data-id=j2] input[name=jobs]")
    pg.click("#bench-compare")
    pg.wait_for_url("**/bench/compare?**")
    heads = pg.locator("table.matrix tr").first.locator("th").all_inner_texts()
    assert heads == ["Task", "j2:oracle", "j1:oracle", "empty"]
    assert pg.locator("#paired-summary").inner_text().startswith("Over 1 of 3 tasks")
    assert pg.locator("tr[data-method='j2:oracle'] .paired-mean").inner_text() == "0"
    _shot(pg, "bench-compare")
    pg.keyboard.press("g")
    pg.keyboard.press("b")
    pg.wait_for_url(bench.base + "/bench")
    assert errors == []


def test_bench_json_and_errors(bench: Bench, page: tuple[Any, list[str]]) -> None:
    pg, errors = page

    class api:  # the page's own Chromium: Playwright's requests cannot resolve `*.localhost`
        @staticmethod
        def get(url: str) -> Fetched:
            return browser_fetch(pg, url)

    jobs = api.get(bench.base + "/api/bench/jobs").json()
    assert [j["id"] for j in jobs["jobs"]] == ["j1", "j2"]
    assert jobs["unreadable"][0]["id"] == "j3"
    assert str(bench.orbit.home) not in str(jobs)
    one = api.get(bench.base + "/api/bench/jobs/smoke").json()
    assert one["paired"]["tasks"] == ["hello"]
    assert one["jobs"][0]["unreadable"][0]["file"] == "cut__empty__9.json"
    both = api.get(bench.base + "/api/bench/compare?jobs=j1,again").json()
    assert [m["label"] for m in both["methods"]] == ["j1:oracle", "empty", "j2:oracle"]
    for path, status in (
        ("/api/bench/jobs/j9", 404),
        ("/api/bench/jobs/j3", 404),
        ("/api/bench/jobs/..%2f..", 404),
        ("/api/bench/compare", 400),
        ("/api/bench/compare?jobs=j1,j9", 404),
        ("/api/bench/compare?jobs=" + ",".join(f"j{i}" for i in range(1, 23)), 400),
    ):
        res = api.get(bench.base + path)
        assert res.status == status, (path, res.text())
        assert set(res.json()) == {"error", "status"}
    res = pg.goto(bench.base + "/bench/jobs/j3")
    assert res is not None and res.status == 404
    assert "does not hold a job" in pg.content() or "cannot be read" in pg.content()
    assert errors == [] or all("404" in e for e in errors)
