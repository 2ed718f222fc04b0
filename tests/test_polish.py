"""Small things an agent tripped over (agent trial, friction points 7 and 10): params, the main
metric and notes in the web's runs list and /api/runs; few `wait -g` progress lines; honest
peaks and durations of a very short run; runs named by a unique name prefix.

Real runs made with Docker (a busybox `true`, a sweep of quick busybox runs, an LR sweep in
orbit/python:local whose lr=2 runs diverge and raise), the web view through `orbit web` and
Debian's Chromium, and hand-made run directories where only names matter.
"""

from __future__ import annotations

import io
import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Orbit, _cleanup_containers, stop_ticker
from docker_setup import BUSYBOX_IMAGE, PYTHON_IMAGE
from test_web_e2e import CHROMIUM, CHROMIUM_ARGS, NEEDS_CHROMIUM
from web_client import loopback

from orbit.cli import wait as wait_cli
from orbit.errors import ExitCode
from orbit.execute.watching import peaks_text
from orbit.human import human_seconds
from orbit.store.home import Home
from orbit.store.model import Run, RunState
from orbit.store.runs import RunStore

SMALL = ("--no-project", "--cpus", "0.5", "--mem", "0.25")
PHONE = {"width": 390, "height": 844}
NOTE = "BEST CONFIG: lr=0.1 converges, lr=2 diverges at step 7"
# Gradient descent on w²: lr=0.1 converges; lr=2 multiplies w by -3 each step, so the loss
# passes 1e6 at step 7 and the script raises, after writing that step's metrics.
TRAIN = """
import json, os, sys
lr, seed = float(sys.argv[1]), int(sys.argv[2])
w = 1.0
with open(os.environ["ORBIT_METRICS"], "a") as fh:
    for step in range(1, 21):
        w = w - lr * 2 * w
        loss = w * w + 0.001 * seed
        fh.write(json.dumps(dict(step=step, loss=loss)) + "\\n")
        fh.flush()
        if loss > 1e6:
            raise OverflowError("loss diverged at step %d" % step)
print("done")
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- wait -g: few progress lines ---------------------------------------------------------------
def _runs(*states: str) -> list[Run]:
    return [Run(str(i), Path("."), {}, {"state": s}) for i, s in enumerate(states, 1)]


def test_progress_prints_a_change_at_most_every_2_s_and_always_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr(wait_cli.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    progress = wait_cli.Progress(out, "g")
    steps = [
        ("queued", "queued"),
        ("running", "queued"),
        ("running", "running"),
        ("succeeded", "running"),
        ("succeeded", "running"),  # no change
    ]
    for states in steps:  # all within one second
        progress.show(_runs(*states))
        clock[0] += 0.2
    assert out.getvalue() == "g: 2 queued\n"  # the first counts at once, the rest held back
    clock[0] += 2.0
    progress.show(_runs("succeeded", "failed"))  # 2 s later: shown
    progress.show(_runs("succeeded", "failed"))
    progress.close()
    assert out.getvalue() == "g: 2 queued\ng: 1 succeeded, 1 failed\n"
    # Counts that changed within 2 s of the last line are printed by close, the final ones.
    out2 = io.StringIO()
    quick = wait_cli.Progress(out2, "q")
    quick.show(_runs("running"))
    quick.show(_runs("succeeded"))
    quick.close()
    assert out2.getvalue() == "q: 1 running\nq: 1 succeeded\n"


@pytest.mark.docker
def test_wait_g_on_a_sweep_of_quick_runs_prints_few_progress_lines(orbit: Orbit) -> None:
    # 0.1 CPU each: all six start at once, so the wait is short even on a busy machine.
    res = orbit(
        "sweep", "--no-project", "--cpus", "0.1", "--mem", "0.1", "--image", BUSYBOX_IMAGE,
        "-g", "quick", "-p", "n=1,2,3,4,5,6",
        "--", "sh", "-c", "sleep 0.$(( {n} % 4 )); test {n} -ne 5",
    )  # fmt: skip
    assert res.code == 0, res.err
    started = time.monotonic()
    waited = orbit("wait", "-g", "quick")
    took = time.monotonic() - started
    assert waited.code == ExitCode.RUN_FAILED, waited.err
    lines = waited.err.splitlines()
    assert all(line.startswith("quick: ") for line in lines), lines
    assert lines[-1] == "quick: 5 succeeded, 1 failed"  # the final counts, always
    # The first line, one at most every 2 s after it, and the final one: however long the wait
    # took on this machine (one line per change was 6 to 14 lines for this sweep).
    assert len(lines) <= 2 + int(took // 2), (lines, took)
    assert len(waited.out.splitlines()) == 6


# --- show: a very short run ----------------------------------------------------------------------
def test_human_seconds_never_says_zero_for_time_that_passed() -> None:
    assert [human_seconds(s) for s in (0.0, 0.044, 0.05, 0.6, 12.3, None)] == [
        "<0.1s",
        "<0.1s",
        "0.1s",
        "0.6s",
        "12s",
        "-",
    ]


def test_peaks_text_says_what_was_not_sampled() -> None:
    nothing = {"mem_bytes": 0, "cpu_cores": 0.0, "cpu_seconds": 0.0}
    assert peaks_text(nothing, 0.02).startswith("not sampled")
    brief = {"mem_bytes": 3821568, "cpu_cores": 0.0, "cpu_seconds": 0.02}
    assert (
        peaks_text(brief, 0.03) == "memory 3.6 MiB, CPU not sampled (ran too briefly), 0.02 CPU-s"
    )
    idle = {"mem_bytes": 3821568, "cpu_cores": 0.0, "cpu_seconds": 0.0}
    assert peaks_text(idle, 30.0) == "memory 3.6 MiB, CPU 0.0 cores, 0.0 CPU-s"  # sampled: 0
    busy = {"mem_bytes": 5 << 20, "cpu_cores": 0.99, "cpu_seconds": 0.55}
    assert peaks_text(busy, 0.3) == "memory 5.0 MiB, CPU 0.99 cores, 0.55 CPU-s"


def _show_lines(orbit: Orbit, run_id: str) -> dict[str, str]:
    res = orbit("show", run_id)
    assert res.code == 0, res.err
    return {line.split()[0]: line.strip() for line in res.out.splitlines()[1:] if line.strip()}


def test_show_of_a_true_run_and_of_a_busy_one(orbit: Orbit, python_image: str) -> None:
    short = orbit.submit("--image", BUSYBOX_IMAGE, *SMALL, "-n", "instant", "--", "true")
    busy_code = "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass\n"
    busy = orbit.submit("--image", python_image, *SMALL, "--", "python3", "-c", busy_code)
    for run_id in (short, busy):
        status = orbit.wait_for(run_id, lambda s: bool(s.get("finished_at")), 120)
        assert status["state"] == "succeeded", status

    shown = _show_lines(orbit, short)
    detail = orbit("show", short, "--json").json()
    assert "not sampled" in shown["peaks"], shown["peaks"]
    assert "0.0 cores" not in shown["peaks"]
    assert "ran 0.0s" not in shown["finished"]
    assert f"(ran {human_seconds(detail['duration_s'])})" in shown["finished"]
    if detail["duration_s"] < 0.05:
        assert shown["finished"].endswith("(ran <0.1s)")
    assert detail["peaks"]["cpu_cores"] == 0  # --json keeps the recorded numbers

    busy_shown = _show_lines(orbit, busy)
    assert "not sampled" not in busy_shown["peaks"], busy_shown["peaks"]
    cores = float(busy_shown["peaks"].split("CPU ")[1].split(" cores")[0])
    assert cores > 0.1, busy_shown["peaks"]  # sampled: the 0.5-CPU limit, roughly


# --- run names by a unique prefix ----------------------------------------------------------------
def _named(store: RunStore, name: str) -> str:
    spec = {
        "name": name,
        "image": "python:3.12-slim",
        "command": ["python", "train.py"],
        "resources": {"cpus": 1.0, "mem_gb": 1.0, "gpus": 0},
    }
    return store.create(spec, state=RunState.SUCCEEDED, reason="", actor="test").id


def test_a_unique_name_prefix_names_a_run(orbit: Orbit) -> None:
    store = RunStore(Home.from_environ(orbit.environ))
    names = ["lr1-s1", "lr1-s2", "lr50-s1", "lr5", "lr5-b", "x", "x", "y", "1st-try", "v", "z"]
    ids = [_named(store, name) for name in names]
    assert ids == [str(i) for i in range(1, 12)]
    store.remove(store.load("1"))  # "lr1-s1"
    store.remove(store.load("10"))  # now "1" is no id and prefixes only run 11

    def show(ref: str) -> tuple[int, str, str]:
        res = orbit("show", ref, "--json")
        return res.code, (res.json()["id"] if res.code == 0 else ""), res.err

    assert show("lr1-s2")[:2] == (0, "2")  # an exact name
    assert show("lr50")[:2] == (0, "3")  # a unique name prefix
    assert show("lr1")[:2] == (0, "2")  # unique: lr1-s1 is gone
    assert show("lr5")[:2] == (0, "4")  # an exact name wins over the prefix of "lr5-b"
    assert show("1")[:2] == (0, "11")  # an id prefix wins over the name prefix of "1st-try"
    assert show("1s")[:2] == (0, "9")  # no id starts with "1s": the name prefix
    assert show("2")[:2] == (0, "2")  # an exact id
    code, _, err = show("lr")
    assert code == ExitCode.NOT_FOUND
    assert err.strip() == "orbit: 'lr' is ambiguous: it matches runs 2, 3, 4, 5", err
    code, _, err = show("x")  # two runs named exactly "x"
    assert code == ExitCode.NOT_FOUND and "'x' is ambiguous: it matches runs 6, 7" in err
    for ref in ("../runs/2", "/etc", "./2"):
        code, _, err = show(ref)
        assert code == ExitCode.NOT_FOUND and "no run" in err, (ref, err)
    code, _, err = show("nomatch")
    assert code == ExitCode.NOT_FOUND
    assert err.strip() == "orbit: no run 'nomatch' (see `orbit ps -a`)"


# --- the web's runs list -------------------------------------------------------------------------
@dataclass
class Sweep:
    orbit: Orbit
    base: str
    token: str
    ids: dict[str, str]  # name -> id


@pytest.fixture(scope="module")
def lr_sweep(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sweep]:
    root = tmp_path_factory.mktemp("polish-web")
    (root / "work").mkdir()
    orbit = Orbit(root / "home", root / "work")
    try:
        res = orbit(
            "sweep", *SMALL, "--image", PYTHON_IMAGE, "-g", "lrs", "-n", "lr{lr}-s{seed}",
            "-p", "lr=0.1,2", "-p", "seed=1,2", "-w", "--json",
            "--", "python3", "-c", TRAIN, "{lr}", "{seed}",
        )  # fmt: skip
        assert res.code == ExitCode.RUN_FAILED, res.err  # the lr=2 runs diverge
        ids = {r["name"]: r["id"] for r in res.json()["runs"]}
        assert orbit("note", ids["lr0.1-s1"], "first look").code == 0
        assert orbit("note", ids["lr0.1-s1"], NOTE).code == 0
        started = orbit("web", "--port", str(_free_port()), "--json")
        assert started.code == 0, started.err
        url = str(started.json()["url"])
        token = (orbit.home / "web-token").read_text().strip()
        yield Sweep(orbit, url.split("/login", 1)[0], token, ids)
        stopped = orbit("web", "--stop", "--json")
        assert stopped.code == 0, stopped.err
    finally:
        stop_ticker(orbit.home)
        _cleanup_containers(orbit.home)


def _api(site: Sweep, path: str) -> Any:
    url, host = loopback(site.base + path)  # Python cannot resolve the secret `*.localhost` name
    req = urllib.request.Request(url, headers={"X-Orbit-Token": site.token, **host})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def test_api_runs_has_params_metrics_and_notes(lr_sweep: Sweep) -> None:
    ids = lr_sweep.ids
    for path in ("/api/runs", "/api/runs?ids=" + ",".join(ids.values())):
        runs = _api(lr_sweep, path)["runs"]
        good, bad = runs[ids["lr0.1-s1"]], runs[ids["lr2-s2"]]
        assert good["params"] == {"lr": "0.1", "seed": "1"}
        assert good["metrics_latest"]["step"] == 20 and good["metrics_latest"]["loss"] < 0.01
        assert good["metric"].startswith("loss 0.00")
        assert good["notes"] == 2 and runs[ids["lr0.1-s2"]]["notes"] == 0
        assert bad["state"] == "failed" and bad["params"] == {"lr": "2", "seed": "2"}
        assert bad["metrics_latest"]["step"] == 7 and bad["metrics_latest"]["loss"] > 1e6


@NEEDS_CHROMIUM
@pytest.mark.chromium
def test_the_runs_list_shows_params_metric_and_notes(lr_sweep: Sweep) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    ids = lr_sweep.ids
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(10_000)
            page.goto(str(lr_sweep.orbit("web", "--json").json()["url"]))

            def cell(run_id: str, css: str) -> str:
                return str(page.locator(f'tr.run[data-id="{run_id}"] td{css}').inner_text())

            # A column per param (web/table.py), a cell per run.
            lr, seed = '[data-col="param:lr"]', '[data-col="param:seed"]'
            assert (cell(ids["lr0.1-s1"], lr), cell(ids["lr0.1-s1"], seed)) == ("0.1", "1")
            assert (cell(ids["lr2-s2"], lr), cell(ids["lr2-s2"], seed)) == ("2", "2")
            assert cell(ids["lr0.1-s1"], ".metric").startswith("loss 0.00")
            assert cell(ids["lr2-s1"], ".metric").startswith("loss ") and "e+06" in cell(
                ids["lr2-s1"], ".metric"
            )
            notes = cell(ids["lr0.1-s1"], ".notes")
            assert notes.startswith("2 · BEST CONFIG: lr=0.1") and notes.endswith("…"), notes
            title = page.locator(f'tr.run[data-id="{ids["lr0.1-s1"]}"] td.notes')
            assert title.get_attribute("title") == NOTE
            assert cell(ids["lr0.1-s2"], ".notes") == ""

            # Filters and sorting still work with the new columns.
            page.goto(lr_sweep.base + "/?name=lr2&sort=name&desc=0")
            rows = [r.get_attribute("data-id") for r in page.locator("tr.run").all()]
            assert rows == [ids["lr2-s1"], ids["lr2-s2"]]
            page.goto(lr_sweep.base + "/?state=succeeded")
            assert page.locator(f"tr.run td{seed}").all_inner_texts() == ["2", "1"]

            # On a phone the page does not scroll sideways; params and metric stay visible.
            phone = browser.new_page(viewport=PHONE)
            phone.context.add_cookies(page.context.cookies())
            phone.goto(lr_sweep.base + "/")
            width = phone.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
            assert width[0] <= width[1], width
            row = phone.locator(f'tr.run[data-id="{ids["lr0.1-s1"]}"]')
            assert row.locator(f"td{lr}").is_visible() and row.locator("td.metric").is_visible()
            assert not row.locator("td.notes").is_visible()
        finally:
            browser.close()
