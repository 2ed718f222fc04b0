"""`orbit compare`, the metric summaries of `orbit show`, and the series parser's min/max steps.

The sweep is real: a python3 script in orbit/python:local writes `step`, `loss` and `acc` to
$ORBIT_METRICS and output/result.json; with lr=10 its loss diverges and it raises.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import Orbit

from orbit.review import series
from orbit.review.series import read_metrics

TRAIN = """
import json, os, sys
lr, seed = float(sys.argv[1]), int(sys.argv[2])
accs = [0.1, 0.3, 0.6, 0.5, 0.4]
loss = 1.0
with open(os.environ["ORBIT_METRICS"], "a") as m:
    for step in range(1, 6):
        loss = loss * (1 - lr) if lr < 1 else loss * (1 + lr)
        m.write(json.dumps(dict(step=step, loss=loss, acc=accs[step - 1])) + "\\n")
if lr >= 1:
    raise RuntimeError("loss diverged: %s" % loss)
with open(os.path.join(os.environ["ORBIT_OUTPUT"], "result.json"), "w") as f:
    json.dump(dict(test_loss=loss, nested=dict(acc=0.5)), f)
"""
RESULTS = ("--result", "output/result.json:test_loss", "--result", "result.json:nested.acc")


@pytest.fixture
def sweep(orbit: Orbit, python_image: str) -> Orbit:
    """Runs 1-4: lr 0.5 (seeds 1, 2) succeed, lr 10 (seeds 1, 2) diverge and fail."""
    res = orbit(
        "sweep", "--image", python_image, "--no-project", "--cpus", "1", "--mem", "0.25",
        "-g", "lr", "-p", "lr=0.5,10", "-p", "seed=1,2", "-n", "lr{lr}-s{seed}",
        "--folder", "papers/lr", "-w", "--", "python3", "-c", TRAIN, "{lr}", "{seed}",
    )  # fmt: skip
    assert res.code == 1, res.err  # two of the four failed
    assert [orbit.status(i)["state"] for i in "1234"] == ["succeeded"] * 2 + ["failed"] * 2
    return orbit


def compared(orbit: Orbit, *args: str) -> dict[str, Any]:
    res = orbit("compare", "--json", *args)
    assert res.code == 0, res.err
    data: dict[str, Any] = res.json()
    return data


def test_compare_json_of_a_sweep(sweep: Orbit, python_image: str) -> None:
    data = compared(sweep, "-g", "lr", *RESULTS)
    rows = data["runs"]
    assert [r["id"] for r in rows] == ["1", "2", "3", "4"]
    assert [(r["params.lr"], r["params.seed"]) for r in rows] == [
        (0.5, 1),
        (0.5, 2),
        (10, 1),
        (10, 2),
    ]
    assert [r["state"] for r in rows] == ["succeeded", "succeeded", "failed", "failed"]
    assert [r["exit_code"] for r in rows] == [0, 0, 1, 1]
    good, bad = rows[0], rows[2]
    # loss 0.5**step falls to its minimum at the last step; 11**step grows from step 1.
    assert (good["loss.last"], good["loss.min"], good["loss.max"]) == (0.03125, 0.03125, 0.5)
    assert good["loss.best_step"] == 5
    assert (bad["loss.last"], bad["loss.min"], bad["loss.max"]) == (161051, 11, 161051)
    assert bad["loss.best_step"] == 1
    assert data["metrics"] == [
        {"name": "loss", "goal": "min", "why": "by its name"},
        {"name": "acc", "goal": "max", "why": "by its name"},
    ]
    assert data["x"] == "step" and data["metrics_left_out"] == []
    # acc is the same in every run: folded, its best (max) at step 3.
    same = data["same"]
    assert same["acc.max"] == 0.6 and same["acc.best_step"] == 3 and same["acc.min"] == 0.1
    assert same["image"] == python_image and same["cpus"] == 1 and same["group"] == "lr"
    assert "params.lr" not in same and "loss.min" not in same and "id" not in same
    assert all(r["acc.max"] == 0.6 for r in rows)  # folded columns stay in every row
    # Result keys: a number where the file has it, null where the run never wrote it.
    assert [r["output/result.json:test_loss"] for r in rows] == [0.03125, 0.03125, None, None]
    assert [r["output/result.json:nested.acc"] for r in rows] == [0.5, 0.5, None, None]
    assert data["results"] == ["output/result.json:test_loss", "output/result.json:nested.acc"]
    # Typed: numbers are numbers, missing is null.
    for r in rows:
        assert isinstance(r["duration_s"], float) and isinstance(r["peak_mem_bytes"], int)
        assert isinstance(r["loss.min"], float) and isinstance(r["loss.best_step"], int)
    assert {c["key"] for c in data["columns"]} == set(rows[0])
    # The folder selects the same runs; ids, names and prefixes pick some.
    assert [r["id"] for r in compared(sweep, "--folder", "papers")["runs"]] == ["1", "2", "3", "4"]
    picked = compared(sweep, "lr10-s2", "1", "--metric", "acc:min,loss")
    assert [r["id"] for r in picked["runs"]] == ["4", "1"]
    assert picked["metrics"] == [
        {"name": "acc", "goal": "min", "why": "given"},
        {"name": "loss", "goal": "min", "why": "by its name"},
    ]
    assert picked["same"]["acc.best_step"] == 1  # the minimum of acc is at step 1
    worst = compared(sweep, "1", "3", "--metric", "loss:max")["runs"]
    assert [r["loss.best_step"] for r in worst] == [1, 5]


def test_compare_text_folds_and_fits(sweep: Orbit, python_image: str) -> None:
    sweep.environ["COLUMNS"] = "200"
    res = sweep("compare", "-g", "lr", *RESULTS)
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0].startswith("same for all: ") and f"image={python_image}" in lines[0]
    assert "cpus=1," in lines[0] and "acc @max=3" in lines[0] and "acc max=0.6" in lines[0]
    header = next(i for i, line in enumerate(lines) if line.startswith("id "))
    titles = lines[header].split()
    for title in ("lr", "seed", "state", "reason", "loss", "@min", "test_loss", "nested.acc"):
        assert title in titles, (title, lines[header])
    assert "acc" not in titles and "image" not in titles  # folded away
    rows = lines[header + 1 : header + 5]
    assert rows[0].split()[:5] == ["1", "lr0.5-s1", "0.5", "1", "succeeded"]
    assert "failed" in rows[2] and "161051" in rows[2] and "exit code 1" in rows[2]
    assert rows[0].split()[-2:] == ["0.03125", "0.5"]  # the result keys
    assert not any(line.startswith("left out") for line in lines)

    sweep.environ["COLUMNS"] = "60"
    narrow = sweep("compare", "-g", "lr", *RESULTS)
    assert narrow.code == 0, narrow.err
    assert all(len(line) <= 60 for line in narrow.out.splitlines()), narrow.out
    assert "left out for width:" in narrow.out
    header = next(line for line in narrow.out.splitlines() if line.startswith("id "))
    assert header.split()[:3] == ["id", "lr", "seed"]  # the parameters stay, names go first


def test_show_has_min_and_max(sweep: Orbit) -> None:
    shown = sweep("show", "3")
    assert shown.code == 0, shown.err
    assert "loss 161051 (min 11 @1, max 161051 @5)" in shown.out
    assert "acc 0.4 (min 0.1 @1, max 0.6 @3)" in shown.out
    data = sweep("show", "--json", "1").json()["metrics"]
    assert data["latest"] == {"step": 5, "loss": 0.03125, "acc": 0.4}  # as before
    assert data["summary"]["loss"] == {
        "latest": 0.03125, "min": 0.03125, "max": 0.5, "count": 5, "min_step": 5, "max_step": 1,
    }  # fmt: skip


def test_a_result_link_out_of_output_is_an_empty_cell(sweep: Orbit, tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"k": 42}))
    out = sweep.run_dir("1") / "output"
    (out / "link.json").symlink_to(secret)
    (out / "bad.json").write_text("{not json")
    data = compared(sweep, "1", "2", "--result", "link.json:k", "--result", "bad.json:k")
    assert [r["output/link.json:k"] for r in data["runs"]] == [None, None]
    assert [r["output/bad.json:k"] for r in data["runs"]] == [None, None]


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("99",), 3, "no run '99'"),
        (("-g", "nope"), 3, "no runs in group 'nope'"),
        (("--folder", "nowhere"), 3, "no runs in folder 'nowhere'"),
        ((), 2, "give run ids, -g GROUP or --folder FOLDER"),
        (("1", "--result", "../x:k"), 2, "must stay inside the run's output/"),
        (("1", "--result", "/etc/passwd:k"), 2, "must stay inside the run's output/"),
        (("1", "--result", "output/x.json"), 2, "give PATH:KEY"),
        (("1", "--metric", "loss:best"), 2, "give METRIC, METRIC:max or METRIC:min"),
    ],
)
def test_bad_input_is_one_line(orbit: Orbit, args: tuple[str, ...], code: int, says: str) -> None:
    res = orbit("compare", *args)
    assert res.code == code, res.err
    assert res.err.count("\n") == 1 and says in res.err and res.out == ""


def _lines(path: Path, points: list[tuple[int, float]], end: str = "\n") -> None:
    with path.open("a") as fh:
        fh.write("\n".join(json.dumps({"step": s, "loss": v}) for s, v in points) + end)


def test_series_min_max_steps_survive_appends_and_downsampling(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    # 10,000 points: a dip at step 1234 and a spike at step 8765 among small wiggles.
    values = [1.0 + (i % 7) / 100 for i in range(10_000)]
    values[1234], values[8765] = 0.25, 9.0
    values[9000] = 0.25  # the same minimum later: the first one counts
    _lines(path, list(enumerate(values)))
    s = read_metrics(path, max_points=100).series["loss"]
    assert len(s.x) <= 100 and s.count == 10_000
    assert (s.min, s.min_at, s.max, s.max_at) == (0.25, 1234, 9.0, 8765)
    key = next(k for k in series._cache if k[0] == str(path))
    parsed = series._cache[key].state

    # Appended: only the new lines are parsed (the same parse state) and the steps follow.
    _lines(path, [(10_000, 0.125), (10_001, 2.0)])
    s = read_metrics(path, max_points=100).series["loss"]
    assert series._cache[key].state is parsed and parsed.keys["loss"].n == 10_002
    assert (s.min, s.min_at, s.max, s.max_at, s.count) == (0.125, 10_000, 9.0, 8765, 10_002)

    # A torn last line counts while it is torn, and again once it is whole.
    _lines(path, [(10_002, 20.0)], end="")
    s = read_metrics(path, max_points=100).series["loss"]
    assert (s.max, s.max_at, s.count) == (20.0, 10_002, 10_003)
    with path.open("a") as fh:
        fh.write("\n")
    _lines(path, [(10_003, 0.5)])
    s = read_metrics(path, max_points=100).series["loss"]
    assert (s.min, s.min_at, s.max, s.max_at, s.count) == (0.125, 10_000, 20.0, 10_002, 10_004)
    assert s.last == 0.5

    # Summary only (max_points=0) and another down-sampling agree with a fresh parse.
    bare = read_metrics(path, max_points=0).series["loss"]
    assert (bare.x, bare.y) == ([], [])
    series._cache.clear()
    fresh = read_metrics(path, max_points=7).series["loss"]
    for got in (bare, fresh):
        assert (got.min, got.min_at, got.max, got.max_at) == (0.125, 10_000, 20.0, 10_002)
    assert os.path.getsize(path) > 0
