"""metrics.summary.json: what the shepherd keeps of a run's metrics, and readers that go on from
it. Whatever the sidecar holds (current, stale, damaged, absent), a reader's result is the one
a parse of the whole file gives."""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Orbit

from orbit.review import series, sidecar
from orbit.review.pyramid import GROUPS_MAX, Pyramid
from orbit.review.series import Follower, read_metrics
from orbit.store.home import Home
from orbit.store.model import Run, RunState
from orbit.store.runs import RunStore
from orbit.web.app import make_app

POINTS = (0, 7, 100, 1000, 2000)


def full_parse(path: Path, max_points: int) -> dict[str, Any]:
    """read_metrics with no sidecar and no cache: the reference."""
    side = sidecar.sidecar_path(path)
    kept = side.read_bytes() if side.exists() else None
    side.unlink(missing_ok=True)
    series._cache.clear()
    try:
        return read_metrics(path, max_points=max_points).to_json()
    finally:
        series._cache.clear()
        if kept is not None:
            side.write_bytes(kept)


def fresh(path: Path, max_points: int) -> dict[str, Any]:
    """read_metrics through the sidecar (if any), cold."""
    series._cache.clear()
    try:
        return read_metrics(path, max_points=max_points).to_json()
    finally:
        series._cache.clear()


def random_line(rng: random.Random, i: int) -> str:
    r = rng.random()
    if r < 0.02:
        return rng.choice(["not json", "[1, 2]", "", "   ", '"text"', "{bad", "null"])
    obj: dict[str, Any] = {}
    if rng.random() < 0.9:
        obj["step"] = i if rng.random() < 0.95 else rng.choice([None, "s", 1e300, -3])
    obj["loss"] = rng.choice(
        [rng.gauss(0, 1), rng.random(), 0.0, -0.0, 7, float("nan"), float("inf"), 10**400]
        if rng.random() < 0.1
        else [math.exp(-i / 500) + rng.random() * 0.1]
    )
    if rng.random() < 0.5:
        obj["acc"] = rng.choice([rng.random(), True, "n/a", None, round(rng.random(), 1)])
    if rng.random() < 0.05:
        obj["phase"] = rng.choice(["train", "eval"])
    if rng.random() < 0.01:
        obj[f"k{rng.randrange(80)}"] = rng.random()  # past MAX_KEYS now and then
    return json.dumps(obj)


def write_random(path: Path, rng: random.Random, n: int, *, torn: bool) -> None:
    text = "\n".join(random_line(rng, i) for i in range(n))
    path.write_text(text if torn else text + "\n")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_sidecar_plus_tail_equals_a_full_parse(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "metrics.jsonl"
    n = rng.choice([1, 5, 900, 2500, 30_000])
    write_random(path, rng, n, torn=rng.random() < 0.5)
    data = path.read_bytes()
    # The shepherd follows the file as it is written, in pieces, with small budgets.
    path.write_bytes(b"")
    follower = Follower(path)
    cut = 0
    while cut < len(data):
        step = rng.choice([1, 100, 5000, 200_000])
        with path.open("ab") as fh:
            fh.write(data[cut : cut + step])
        cut += step
        follower.update(rng.choice([None, 64, 4096]))
        if rng.random() < 0.2:  # a reader meanwhile: sidecar + what was appended since
            for points in (0, 1000):
                assert fresh(path, points) == full_parse(path, points)
    while not follower.update(4096):
        pass
    for points in POINTS:
        assert fresh(path, points) == full_parse(path, points)
    # A torn last line and lines appended after the sidecar are read by the reader.
    with path.open("a") as fh:
        fh.write('\n{"step": 99999, "loss": -5.0}\n{"step": 100000, "loss": 1e9, "acc"')
    for points in POINTS:
        assert fresh(path, points) == full_parse(path, points)


def test_pyramid_is_the_same_however_the_points_come(tmp_path: Path) -> None:
    rng = random.Random(3)
    ys = [rng.choice([rng.random(), 0.5, 0.5]) for _ in range(50_000)]
    xs = [float(i) for i in range(len(ys))]
    whole = Pyramid()
    whole.add(xs, ys)
    pieces = Pyramid()
    i = 0
    while i < len(ys):
        j = i + rng.choice([1, 3, 1000, 7777])
        pieces.add(xs[i:j], ys[i:j])
        i = j
    assert whole.to_json() == pieces.to_json()
    assert len(whole.groups) <= GROUPS_MAX and len(whole.points()[0]) <= 2 * GROUPS_MAX + 2
    lo, hi = whole.extremes()
    assert (lo[2], lo[0]) == (min(ys), ys.index(min(ys)))
    assert (hi[2], hi[0]) == (max(ys), ys.index(max(ys)))
    assert Pyramid.from_json(json.loads(json.dumps(whole.to_json()))).to_json() == whole.to_json()


def lines(path: Path, start: int, n: int, mode: str = "a") -> None:
    with path.open(mode) as fh:
        for i in range(start, start + n):
            fh.write(json.dumps({"step": i, "loss": 1 / (i + 1), "acc": (i % 97) / 97}) + "\n")


def test_stale_damaged_or_foreign_sidecars_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    side = sidecar.sidecar_path(path)
    lines(path, 0, 5000, "w")
    Follower(path).update()
    good = json.loads(side.read_text())
    assert good["offset"] == path.stat().st_size and good["summary"]["loss"]["count"] == 5000

    def check() -> None:
        for points in (0, 1000):
            assert fresh(path, points) == full_parse(path, points)

    # The file truncated and rewritten (shorter, then as long but different).
    lines(path, 100, 1000, "w")
    check()
    lines(path, 100, 6000, "w")
    assert path.stat().st_size > good["offset"]
    check()
    # The file replaced by one with the same first line but other lines.
    lines(path, 0, 5000, "w")
    side.write_text(json.dumps(good))
    with path.open("r+b") as fh:  # one byte changed just before the offset
        fh.seek(good["offset"] - 3)
        fh.write(b"9")
    check()
    lines(path, 0, 5000, "w")
    damaged: list[Any] = [
        "not json",
        "",
        json.dumps({**good, "format": 2}),
        json.dumps({**good, "offset": good["offset"] + 10}),
        json.dumps({**good, "offset": "12"}),
        json.dumps({**good, "head": "!!"}),
        json.dumps({**good, "groups_max": GROUPS_MAX + 1}),
        json.dumps({**good, "keys": {"loss": {**good["keys"]["loss"], "n": 4999}}}),
        json.dumps({**good, "keys": {"loss": {**good["keys"]["loss"], "groups": [[1, 2]]}}}),
        json.dumps({**good, "keys": []}),
        json.dumps({**good, "x_now": "x"}),
        json.dumps([good]),
    ]
    for text in damaged:
        side.write_text(text)
        check()
    side.write_text(json.dumps(good))  # the good one again: it is used
    lines(path, 5000, 10)
    series._cache.clear()
    assert read_metrics(path).series["loss"].count == 5010
    key = next(k for k in series._cache if k[0] == str(path))
    assert series._cache[key].state.from_sidecar == good["offset"]
    check()


def test_a_reader_that_may_write_saves_the_sidecar(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    lines(path, 0, 3000, "w")
    series._cache.clear()
    read_metrics(path, max_points=0)
    assert not sidecar.sidecar_path(path).exists()  # the web view never writes
    series._cache.clear()
    before = read_metrics(path, max_points=0, save=True).to_json()
    assert sidecar.sidecar_path(path).exists()
    assert fresh(path, 0) == before == full_parse(path, 0)


def test_another_x_axis_is_its_own_parse_and_never_the_sidecar(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    lines(path, 0, 3000, "w")
    series._cache.clear()
    default = read_metrics(path, max_points=100, save=True).to_json()
    side = sidecar.sidecar_path(path)
    saved = side.read_bytes()
    by_acc = read_metrics(path, max_points=100, save=True, x_key="acc")
    assert by_acc.x_label == "acc" and set(by_acc.series) == {"step", "loss"}
    assert by_acc.series["step"].count == 3000 and by_acc.series["step"].max_at == (2999 % 97) / 97
    by_line = read_metrics(path, max_points=0, x_key="")  # the line number
    assert by_line.x_label == "line" and by_line.series["loss"].min_at == 3000
    lines(path, 3000, 10)
    assert read_metrics(path, max_points=0, x_key="acc").series["step"].count == 3010
    assert side.read_bytes() == saved  # neither read nor rewritten by another axis
    assert read_metrics(path, max_points=100).to_json() != default  # the default axis grew
    assert fresh(path, 100) == full_parse(path, 100)


# --- the readers: web pages and `orbit show --json` -----------------------------------------
def make_run(home: Home, n: int) -> Run:
    spec = {
        "name": "big",
        "group": "g",
        "tags": {},
        "params": {},
        "image": "python:3.12-slim",
        "command": ["python", "train.py"],
        "resources": {"cpus": 1.0, "mem_gb": 2.0, "gpus": 0},
    }
    fields = {
        "exit_code": 0,
        "started_at": "2026-11-30T06:00:00.000+00:00",
        "finished_at": "2026-11-30T07:00:00.000+00:00",
        "lease": {"cpus": 1.0, "mem_gb": 2.0, "gpus": []},
    }
    run = RunStore(home).create(
        spec, state=RunState.SUCCEEDED, reason="", actor="test", status_fields=fields
    )
    write_random(run.path("metrics.jsonl"), random.Random(n), n, torn=False)
    return run


def test_web_pages_are_the_same_with_and_without_the_sidecar(tmp_path: Path) -> None:
    home = Home(tmp_path / "home", {})
    home.ensure()
    run = make_run(home, 20_000)
    metrics = run.path("metrics.jsonl")
    app = make_app(home, token="t")
    urls = [f"/runs/{run.id}", f"/api/series?ids={run.id}", f"/api/runs/{run.id}/metrics"]
    urls.append(f"/api/runs/{run.id}/metrics?points=2000")
    urls.append(f"/compare?ids={run.id}")

    def pages() -> list[bytes]:
        series._cache.clear()
        out = []
        for url in urls:
            path, _, query = url.partition("?")
            environ = {
                "REQUEST_METHOD": "GET",
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "HTTP_X_ORBIT_TOKEN": "t",
                "SERVER_NAME": "localhost",
                "SERVER_PORT": "80",
                "wsgi.url_scheme": "http",
                "wsgi.input": None,
            }
            status: list[str] = []
            body = b"".join(app(environ, lambda st, h, e=None, s=status: s.append(st)))
            assert status[0].startswith("200"), (url, status, body[:200])
            out.append(body)
        return out

    without = pages()
    assert not sidecar.sidecar_path(metrics).exists()  # the web view wrote none
    follower = Follower(metrics)
    follower.update()
    assert pages() == without
    lines(metrics, 20_000, 300)  # appended after the sidecar
    longer = pages()
    sidecar.sidecar_path(metrics).unlink()
    assert pages() == longer


def test_show_json_is_the_same_with_and_without_the_sidecar(orbit: Orbit) -> None:
    home = Home(orbit.home, {})
    home.ensure()
    run = make_run(home, 12_000)
    side = sidecar.sidecar_path(run.path("metrics.jsonl"))
    series._cache.clear()
    without = orbit("show", "--json", run.id)
    assert without.code == 0, without.err
    assert side.exists()  # a finished run's first `show` saved it
    first = json.loads(side.read_text())
    series._cache.clear()
    with_it = orbit("show", "--json", run.id)
    assert with_it.json() == without.json()
    assert json.loads(side.read_text()) == first
    assert without.json()["metrics"]["summary"]["loss"]["count"] > 10_000
    text = orbit("show", run.id).out
    series._cache.clear()
    side.unlink()
    assert orbit("show", run.id).out == text


# --- a real run ---------------------------------------------------------------------------
SCRIPT = """
import json, os, time
with open(os.environ["ORBIT_METRICS"], "a") as fh:
    for i in range(40000):
        fh.write(json.dumps({"step": i, "loss": 1 / (i + 1), "tag": "x" if i % 2 else 1}) + "\\n")
        if i % 2000 == 0:
            fh.flush()
            time.sleep(0.35)
    fh.write('{"step": 40000, "loss": -1}')
"""


def test_a_real_run_ends_with_a_sidecar_that_matches_its_metrics(
    orbit: Orbit, python_image: str
) -> None:
    res = orbit(
        "run", "--image", python_image, "--no-project", "--cpus", "1", "--mem", "0.25", "-w",
        "--", "python3", "-c", SCRIPT,
    )  # fmt: skip
    assert res.code == 0, res.err
    metrics = orbit.run_dir("1") / "metrics.jsonl"
    side = sidecar.sidecar_path(metrics)
    deadline = time.monotonic() + 60
    data: dict[str, Any] = {}
    while time.monotonic() < deadline:  # the shepherd's last update follows the settling
        if side.exists():
            data = json.loads(side.read_text())
            if data["offset"] == metrics.stat().st_size - len('{"step": 40000, "loss": -1}'):
                break
        time.sleep(0.2)
    else:
        raise AssertionError(f"the sidecar never covered the file: {data.get('offset')}")
    assert data["format"] == 1 and data["summary"]["loss"]["count"] == 40000
    assert data["summary"]["loss"]["min_at"] == 39999.0
    for points in POINTS:
        assert fresh(metrics, points) == full_parse(metrics, points)
    shown = orbit("show", "--json", "1").json()["metrics"]["summary"]["loss"]
    assert (shown["count"], shown["latest"], shown["min"]) == (40001, -1.0, -1.0)


def test_a_cached_parse_far_behind_takes_a_newer_sidecar(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    lines(path, 0, 1000, "w")
    series._cache.clear()
    assert read_metrics(path).series["loss"].count == 1000
    key = next(k for k in series._cache if k[0] == str(path))
    lines(path, 1000, 120_000)  # more than SIDECAR_GAIN appended
    assert path.stat().st_size - series._cache[key].state.offset > series.SIDECAR_GAIN
    Follower(path).update()
    lines(path, 121_000, 10)
    got = read_metrics(path).to_json()
    assert (
        series._cache[key].state.from_sidecar
        == json.loads(sidecar.sidecar_path(path).read_text())["offset"]
    )
    assert got == full_parse(path, 1000)
