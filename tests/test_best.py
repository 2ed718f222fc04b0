"""`orbit best`: the best run and the best setting of a realistic lr × seed sweep, in which the
single best run (a lucky seed of lr=0.1) and the best setting (lr=1 on average) differ."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Orbit
from review_sweep import lr_sweep, project

from orbit.errors import ExitCode

SETTING = {"params", "mean", "std", "n", "runs", "failed", "unscored", "min", "max", "run_ids",
           "best_run", "best"}  # fmt: skip


@pytest.fixture
def swept(orbit: Orbit, python_image: str, tmp_path: Path) -> dict[tuple[str, str], str]:
    return lr_sweep(orbit, python_image, project(tmp_path))


def test_best_run_and_best_setting_differ(orbit: Orbit, swept: dict[tuple[str, str], str]) -> None:
    best = orbit("best", "-g", "lrs", "--metric", "loss", "--json")
    assert best.code == 0, best.err
    assert set(best.json()) == {"group", "metric", "maximize", "objective", "best"}
    data = best.json()["best"]
    assert set(data) == {"id", "name", "params", "value", "scored", "runs"}
    assert data["id"] == swept[("0.1", "2")]
    assert data["params"] == {"lr": "0.1", "seed": "2"}
    assert data["value"] == pytest.approx(0.98**120 - 0.04, abs=1e-9)
    assert (data["scored"], data["runs"]) == (6, 9)

    text = orbit("best", "-g", "lrs", "--metric", "loss")
    assert text.code == 0
    assert f"best run {swept[('0.1', '2')]} (lr0.1-s2): loss 0.04854" in text.out
    assert "final value" in text.out

    ranked = orbit("best", "-g", "lrs", "--metric", "loss", "--by-params", "--json")
    assert ranked.code == 0, ranked.err
    assert set(ranked.json()) == {
        "group", "metric", "maximize", "objective", "seed_keys", "settings"
    }  # fmt: skip
    settings = ranked.json()["settings"]
    assert {frozenset(s) for s in settings} == {frozenset(SETTING)}
    assert [s["params"] for s in settings] == [{"lr": "1"}, {"lr": "0.1"}, {"lr": "50"}]
    top, slow, diverged = settings
    assert top["best"] and not slow["best"] and not diverged["best"]
    assert (top["n"], top["runs"], top["failed"]) == (3, 3, 0)
    assert top["mean"] == pytest.approx(0.12, abs=1e-6)
    assert top["std"] == pytest.approx(0.01, abs=1e-6)  # the sample std of .11 .12 .13
    assert top["best_run"] == swept[("1", "1")]
    assert slow["mean"] == pytest.approx(0.98**120 + (0.20 - 0.04 + 0.25) / 3, abs=1e-6)
    assert (diverged["n"], diverged["failed"], diverged["mean"]) == (0, 3, None)
    assert sorted(diverged["run_ids"]) == sorted(swept[("50", s)] for s in "123")

    table = orbit("best", "-g", "lrs", "--metric", "loss", "--by-params")
    assert table.code == 0
    lines = table.out.splitlines()
    marked = [line for line in lines if line.startswith("*")]
    assert len(marked) == 1 and "lr=1 " in marked[0] + " " and "0.12 ± 0.01" in marked[0]
    assert any("lr=50" in line and "0/3" in line and " 3 " in line for line in lines)
    assert "best setting: lr=1 (mean 0.12 ± 0.01, n=3)" in table.out

    # Larger is better: the diverging setting still never wins, lr=0.1 (higher mean) does.
    flipped = orbit("best", "-g", "lrs", "--metric", "loss", "--by-params", "--max", "--json")
    assert flipped.json()["settings"][0]["params"] == {"lr": "0.1"}


def test_seed_key_and_a_setting_with_fewer_runs(
    orbit: Orbit, swept: dict[tuple[str, str], str]
) -> None:
    # --seed-key adds a key to the seed-like ones: with lr too, the sweep is one setting.
    one = orbit("best", "-g", "lrs", "--metric", "loss", "--by-params", "--seed-key", "lr",
                "--json")  # fmt: skip
    assert one.json()["seed_keys"][-1] == "lr"
    [only] = one.json()["settings"]
    assert (only["params"], only["n"], only["runs"], only["failed"]) == ({}, 6, 9, 3)
    # Remove one lr=1 run: its setting says it has 2 runs, and is still the best.
    assert orbit("rm", "--yes", swept[("1", "3")]).code == 0
    text = orbit("best", "-g", "lrs", "--metric", "loss", "--by-params")
    assert "best setting: lr=1 (mean 0.115 ± 0.007071, n=2)" in text.out


def test_bad_input(orbit: Orbit, swept: dict[tuple[str, str], str]) -> None:
    missing = orbit("best", "-g", "lrs", "--metric", "accuracy")
    assert missing.code == ExitCode.NOT_FOUND
    assert missing.err == (
        "orbit: 'accuracy' was logged by none of the 6 succeeded runs (they logged: step, loss)\n"
    )
    assert len(missing.err.splitlines()) == 1
    nogroup = orbit("best", "-g", "nope", "--metric", "loss")
    assert nogroup.code == ExitCode.NOT_FOUND and "nope" in nogroup.err
    usage = orbit("best", "--metric", "loss")
    assert usage.code == ExitCode.USAGE and len(usage.err.splitlines()) == 1
