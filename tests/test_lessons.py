"""`orbit lessons`: the digest of a realistic lr × seed sweep (lr=50 diverges with a
traceback), by group and by project directory; its size; and that it is kept up to date
incrementally (a new run is read, unchanged runs are not)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SMALL, Orbit
from review_sweep import Swept, lr_sweep, project

from orbit.errors import ExitCode
from orbit.review.lessons import Scope, cache_path
from orbit.store.home import Home
from orbit.store.runs import RunStore


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return project(tmp_path)


@pytest.fixture
def swept(orbit: Orbit, python_image: str, repo: Path) -> Swept:
    return lr_sweep(orbit, python_image, repo)


def test_digest_of_a_sweep(orbit: Orbit, swept: Swept, repo: Path) -> None:
    orbit.environ["ORBIT_AUTHOR"] = "ada"
    assert orbit("note", "-g", "lrs", "lr=1 wins on average; lr=0.1 s2 was luck").code == 0
    assert orbit("note", swept[("50", "1")], "diverged at step 4").code == 0
    ids = [swept[("1", seed)] for seed in "123"]
    assert orbit("note", *ids, "lr=1 converges in every seed").code == 0

    res = orbit("lessons", "-g", "lrs")
    assert res.code == 0, res.err
    text = res.out
    print(text)
    assert len(text) < 4000 and max(len(line) for line in text.splitlines()) <= 100
    assert text.startswith("# Lessons of group lrs\n")
    assert "9 runs: 6 succeeded, 3 failed." in text
    assert "- lr: 0.1 ×3, 1 ×3, 50 ×3" in text and "- seed: 1 ×3, 2 ×3, 3 ×3" in text
    # The best setting with its mean, the diverging one with its failures, the lucky run.
    assert "## Best by final loss, lowest is better (picked, direction by its name)" in text
    assert "- best setting: lr=1: mean 0.12 ± 0.01 (n=3 of 3;" in text
    assert "- lr=50: no succeeded run with loss (3 of 3 failed)" in text
    assert f"- best single run: {swept[('0.1', '2')]} (lr=0.1, seed=2), loss 0.04854" in text
    # The failure: its cause from the traceback, shared by exactly the lr=50 runs.
    failures = text.split("## Failures\n")[1].split("\n\n")[0]
    assert "3×" in failures and "FloatingPointError" in failures and "all lr=50" in failures
    # The group's conclusion whole near the top, then the other notes, newest first.
    conclusion = text.split("## Conclusion of group lrs (")[1].split("\n\n")[0]
    assert conclusion.endswith(", ada)\nlr=1 wins on average; lr=0.1 s2 was luck")
    notes = text.split("## Notes (newest first)\n")[1].splitlines()
    assert f"runs {', '.join(ids)}, ada] lr=1 converges in every seed" in notes[0]  # once
    assert "run " + swept[("50", "1")] in notes[1] and "diverged at step 4" in notes[1]
    assert len(notes) == 2

    data = orbit("lessons", "-g", "lrs", "--json").json()
    assert set(data) == {
        "scope",
        "runs",
        "unreadable",
        "states",
        "params",
        "groups",
        "objective",
        "metrics_logged",
        "metric",
        "maximize",
        "best_run",
        "settings",
        "settings_total",
        "failures",
        "notes",
        "notes_total",
        "cache",
    }
    assert {frozenset(n) for n in data["notes"]} == {
        frozenset({"time", "author", "text", "group", "runs"})
    }
    assert data["metric"] == "loss" and data["maximize"] is False
    assert data["states"] == {"succeeded": 6, "failed": 3}
    best = data["settings"][0]
    assert (best["params"], best["n"], best["best"]) == ({"lr": "1"}, 3, True)
    assert best["mean"] == pytest.approx(0.12, abs=1e-6)
    assert data["best_run"]["id"] == swept[("0.1", "2")]
    [failure] = data["failures"]
    assert failure["count"] == 3

    # A metric that no run logged: nothing can be ranked by it, one line says why.
    other = orbit("lessons", "-g", "lrs", "--metric", "accuracy", "--max")
    assert other.code == ExitCode.NOT_FOUND and other.out == ""
    assert other.err == (
        "orbit: 'accuracy' was logged by none of the 6 succeeded runs (they logged: step, loss)\n"
    )

    # By project: the runs whose code came from this repository (the cwd's, or named).
    by_dir = orbit("lessons", cwd=repo)
    assert by_dir.code == 0, by_dir.err
    assert by_dir.out.startswith(f"# Lessons of project {repo.resolve()}\n")
    assert "9 runs: 6 succeeded, 3 failed." in by_dir.out
    assert orbit("lessons", str(repo)).out == by_dir.out


def test_incremental(orbit: Orbit, swept: Swept, python_image: str, repo: Path) -> None:
    store = RunStore(Home(orbit.home))
    first = orbit("lessons", "-g", "lrs", "--json").json()
    assert first["cache"] == {"runs": 9, "read": 9}
    path = cache_path(store, Scope(group="lrs"))
    before = json.loads(path.read_text())["runs"]
    stamp = path.stat().st_mtime_ns

    again = orbit("lessons", "-g", "lrs", "--json").json()
    assert again["cache"] == {"runs": 9, "read": 0}  # nothing changed: no run read
    assert path.stat().st_mtime_ns == stamp  # and the cache not rewritten
    assert {k: v for k, v in again.items() if k != "cache"} == {
        k: v for k, v in first.items() if k != "cache"
    }

    # A new run finishes (lr=1 once more, by hand): only it is read.
    ran = orbit(
        "run", "--json", "-w", "-g", "lrs", "-n", "lr1-again", "--image", python_image,
        "--cpus", "0.5", "--mem", "0.25", "--", "python3", "train.py", "1", "1", cwd=repo,
    )  # fmt: skip
    assert ran.code == 0, ran.err
    new = str(ran.json()["id"])
    after = orbit("lessons", "-g", "lrs", "--json").json()
    assert after["cache"] == {"runs": 10, "read": 1}
    assert after["states"] == {"succeeded": 7, "failed": 3}
    cached = json.loads(path.read_text())["runs"]
    assert {k: cached[k] for k in before} == before  # the other runs' entries as they were
    # The new run has no params (orbit run): a setting of its own, whose one run (0.11) is
    # now the lowest mean; lr=1 (3 runs) follows.
    top, second = after["settings"][:2]
    assert (top["params"], top["n"], top["best_run"]) == ({}, 1, new)
    assert (second["params"], second["n"]) == ({"lr": "1"}, 3)

    # A note on one run: that run alone is read again, and the digest shows the note.
    assert orbit("note", swept[("1", "2")], "checked: converged").code == 0
    noted = orbit("lessons", "-g", "lrs", "--json").json()
    assert noted["cache"] == {"runs": 10, "read": 1}
    assert noted["notes"][0]["text"] == "checked: converged"

    # A removed run leaves the digest (and the cache).
    assert orbit("rm", "--yes", new).code == 0
    gone = orbit("lessons", "-g", "lrs", "--json").json()
    assert gone["runs"] == 9 and new not in json.loads(path.read_text())["runs"]


def test_size_bound_with_many_values_and_notes(orbit: Orbit, busybox: str) -> None:
    # 30 runs with distinct params and long notes: the digest stays a page.
    values = ",".join(str(i) for i in range(30))
    swept = orbit(
        "sweep", "-g", "wide", "-p", f"x={values}", "--image", busybox, *SMALL, "--", "true"
    )
    assert swept.code == 0, swept.err
    store = RunStore(Home(orbit.home))
    for row in store.list_rows():
        assert isinstance(row, dict)
        run_id = row["id"]
        orbit("note", run_id, "--text", f"note {run_id}: " + "a long observation " * 100)
    res = orbit("lessons", "-g", "wide")
    assert res.code == 0, res.err
    assert len(res.out) <= 5000 and max(len(line) for line in res.out.splitlines()) <= 100
    assert 1 <= res.out.count("\n- [") <= 8
    assert "a long observation a long" in res.out  # wrapped, not cut at the line's end
    assert "- x: 30 values, 0 … 29" in res.out


def test_bad_input(orbit: Orbit, tmp_path: Path) -> None:
    res = orbit("lessons", "-g", "nope")
    assert res.code == ExitCode.NOT_FOUND and res.err == "orbit: no runs in group nope\n"
    plain = tmp_path / "plain"
    plain.mkdir()
    res = orbit("lessons", cwd=plain)
    assert res.code == ExitCode.USAGE and "not inside a Git repository" in res.err
    res = orbit("lessons", str(plain), "-g", "x")
    assert res.code == ExitCode.USAGE and len(res.err.splitlines()) == 1


def test_conclusions_are_whole_and_long_notes_say_where_the_rest_is(
    orbit: Orbit, swept: Swept, repo: Path
) -> None:
    from orbit.agents.hooks import fit, lessons_context

    orbit.environ["ORBIT_AUTHOR"] = "ada"
    words = "lr=1 wins on average; lr=0.1 s2 was a lucky seed; lr=50 diverges at step 4. "
    conclusion = (words * 4)[:300].rstrip() + " END"
    long_note = "x" * 900 + " TAIL"
    assert orbit("note", "-g", "lrs", "an older conclusion").code == 0
    assert orbit("note", "-g", "lrs", conclusion).code == 0
    assert orbit("note", swept[("50", "1")], long_note).code == 0
    flat = " ".join(conclusion.split())

    text = orbit("lessons", "-g", "lrs").out
    top = text.split("## Conclusion of group lrs (")[1].split("\n\n")[0]
    assert " ".join(top.split("\n", 1)[1].split()) == flat  # whole, wrapped at 100 columns
    notes = text.split("## Notes (newest first)\n")[1]
    run = swept[("50", "1")]
    assert f"[shortened: {len(long_note)} characters; whole: orbit show {run}]" in notes
    assert "TAIL" not in notes and "an older conclusion" in notes
    data = orbit("lessons", "-g", "lrs", "--json").json()
    texts = [n["text"] for n in data["notes"]]
    assert conclusion in texts and long_note in texts and data["notes_total"] == 3

    # The SessionStart digest carries the conclusion whole, however little room is left.
    context = lessons_context(Home(orbit.home), str(repo))
    assert "## Conclusion of group lrs (" in context
    assert flat in " ".join(context.split())
    short = fit(text, 50)
    assert flat in " ".join(short.split()) and "## Tried" not in short
    assert short.endswith("\n… (the rest: `orbit lessons`)\n")
