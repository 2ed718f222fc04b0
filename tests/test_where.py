"""Filter expressions (orbit/review/where.py): parsing, matching, the one-line errors, and
`orbit ps --where` over real run directories (one read through the shepherd's sidecar)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Orbit

from orbit.errors import ExitCode, UsageError
from orbit.review.metrics import Summary
from orbit.review.series import Follower
from orbit.review.where import Term, parse
from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore


def _run(**fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"id": "7", "name": "lr1e-4-s1", "state": "succeeded", "group": "g"}
    row.update(params={"lr": "1e-4", "opt": "sgd", "seed": "1"}, tags={"baseline": "yes"})
    row.update(fields)
    return row


METRICS = {
    "loss": Summary(latest=0.25, min=0.2, max=2.0, count=10, min_step=8, max_step=1),
    "acc": Summary(latest=0.9, min=0.1, max=0.91, count=10, min_step=1, max_step=9),
    "train/loss.total": Summary(latest=3.0, min=3.0, max=3.0, count=1, min_step=1, max_step=1),
}


def _holds(text: str, row: dict[str, Any] | None = None) -> bool:
    return parse(text).matches(row or _run(), lambda: METRICS)


def test_the_example_of_the_issue() -> None:
    where = parse("lr<1e-3 loss<0.3 state=succeeded tag:baseline opt=sgd")
    assert [t.kind for t in where.terms] == ["auto", "auto", "field", "tag", "auto"]
    assert where.terms[0] == Term("auto", "lr", "<", ("1e-3",), 1e-3)
    assert where.matches(_run(), lambda: METRICS)
    assert not where.matches(_run(state="failed"), lambda: METRICS)
    assert not where.matches(_run(params={"lr": "0.01", "opt": "sgd"}), lambda: METRICS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("lr<=1e-4", True),
        ("lr<1e-4", False),
        ("lr>=0.0001", True),
        ("lr=0.0001", True),  # numbers compare as numbers: 1e-4 == 0.0001
        ("lr==1e-4", True),
        ("lr!=1e-4", False),
        ("opt=adam,sgd", True),  # alternatives
        ("opt!=adam,sgd", False),
        ("opt~SG", True),  # contains, any case
        ("name~S1", True),
        ("name=lr1e-4-s1", True),
        ("loss<0.3", True),  # a metric (the final value) when no param has the name
        ("loss>0.3", False),
        ("min:loss<0.21", True),
        ("max:loss>=2", True),
        ("final:acc>0.8", True),
        ("metric:acc>0.95", False),
        ("train/loss.total=3", True),  # keys with dots and slashes
        ("param:loss<1", False),  # no such param
        ("tag:baseline", True),
        ("tag:baseline=yes", True),
        ("tag:baseline=no", False),
        ("tag:other", False),
        ("state=failed,succeeded", True),
        ("id>5", True),
        ('name="lr1e-4-s1"', True),
        ("nothing=1", False),  # a key the run does not have matches no term
        ("nothing!=1", False),
        ("", True),
    ],
)
def test_terms(text: str, expected: bool) -> None:
    assert _holds(text) is expected, text


def test_a_param_comes_before_a_metric_and_prefixes_choose() -> None:
    row = _run(params={"loss": "5"})
    assert _holds("loss=5", row)  # the param
    assert _holds("metric:loss=0.25", row)  # the metric of that name


def test_metrics_are_read_only_when_a_term_needs_them() -> None:
    calls: list[int] = []

    def metrics() -> dict[str, Summary]:
        calls.append(1)
        return METRICS

    assert not parse("state=succeeded param:lr<1 tag:x").needs_metrics
    assert parse("lr<1").needs_metrics  # a param, or else a metric
    assert parse("state=succeeded lr<1").matches(_run(), metrics) and not calls
    assert parse("loss<1 acc>0.5 min:loss<1").matches(_run(), metrics)
    assert calls == [1]  # once per run, however many terms ask


def test_ordering_needs_numbers_on_both_sides() -> None:
    assert not _holds("opt<5")  # "sgd" is not a number
    assert not _holds("name>1")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lr<", "bad filter term 'lr<': no value after '<'"),
        ("lr<abc", "bad filter term 'lr<abc': '<' needs a number, not 'abc'"),
        ("lr<nan", "'<' needs a number, not 'nan'"),
        ("loss", "bad filter term 'loss': expected KEY=VALUE, KEY<NUMBER, … or tag:NAME"),
        ("=3", "expected KEY=VALUE"),
        ("tag:", "name the tag"),
        ("min:<3", "name the key after min:"),
        ('name="unclosed', "bad filter expression: No closing quotation"),
        (" ".join(["a=1"] * 65), "more than 64 terms"),
    ],
)
def test_bad_expressions_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError) as err:
        parse(text)
    assert message in str(err.value) and "\n" not in str(err.value)


def _made(store: RunStore, name: str, lr: str, loss: float, state: RunState) -> str:
    spec = {
        "name": name,
        "group": "g",
        "tags": {"baseline": "yes"} if lr == "0.1" else {},
        "params": {"lr": lr},
        "image": "python:3.12-slim",
        "command": ["python", "train.py"],
        "resources": {"cpus": 1.0, "mem_gb": 1.0, "gpus": 0},
    }
    run = store.create(spec, state=state, reason="", actor="test", status_fields={})
    lines = [{"step": s, "loss": loss * (4 - s)} for s in (1, 2, 3)]
    run.path("metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    if lr != "0.001":  # one run without the shepherd's sidecar: parsed instead
        Follower(run.path("metrics.jsonl")).update()
    return run.id


def test_orbit_ps_where(tmp_path: Path) -> None:
    orbit = Orbit(tmp_path / "home", tmp_path)
    store = RunStore(Home.from_environ(orbit.environ))
    a = _made(store, "a", "0.1", 0.5, RunState.SUCCEEDED)
    b = _made(store, "b", "0.01", 0.2, RunState.FAILED)
    c = _made(store, "c", "0.001", 0.1, RunState.SUCCEEDED)

    def ids(expr: str) -> list[str]:
        res = orbit("ps", "--where", expr, "--json")
        assert res.code == 0, res.err
        return sorted(r["id"] for r in res.json()["runs"])

    assert ids("lr<0.05") == sorted([b, c])  # implies -a: finished runs are listed
    assert ids("loss<0.3") == sorted([b, c])  # final values 0.5, 0.2, 0.1
    assert ids("max:loss>=0.5") == sorted([a, b])  # maxima 1.5, 0.6, 0.3
    assert ids("state=succeeded tag:baseline") == [a]
    assert orbit("ps", "--where", "loss<0", "-a").out.strip() == "no runs match"
    bad = orbit("ps", "--where", "loss<<1")
    assert bad.code == ExitCode.USAGE
    assert bad.err.strip() == "orbit: bad filter term 'loss<<1': '<' needs a number, not '<1'"


def test_a_list_reads_the_sidecars_summary_and_nothing_else(tmp_path: Path) -> None:
    """metrics.glance gives what `orbit show --json` gives, read from the summary at the head of
    metrics.summary.json; an older sidecar (summary last), a stale one and none give it too."""
    from orbit.review import sidecar
    from orbit.review.metrics import glance, summarize_with_x
    from orbit.store.model import Run

    run = Run("1", tmp_path)
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        "".join(json.dumps({"step": s, "loss": 1 / s, "k": s}) + "\n" for s in (1, 2, 3))
    )
    expected = summarize_with_x(run)[1]
    Follower(path).update()
    side = sidecar.sidecar_path(path)
    raw = side.read_bytes()
    assert raw.index(b'"summary"') < raw.index(b'"keys"')  # the summary comes first
    assert glance(run) == (expected, True)
    with open(path, "rb") as fh:  # the prefix alone holds what read_summary returns
        head = sidecar.read_summary(path, fh, path.stat().st_size)
    assert head is not None and "keys" not in head and head["summary"]["loss"]["min"] == 1 / 3

    data = json.loads(raw)  # a sidecar of an earlier version: the summary last
    data["summary"] = data.pop("summary")
    side.write_text(json.dumps(data))
    assert glance(run) == (expected, True)
    with open(path, "a") as fh:  # the run wrote on: the sidecar covers a prefix only
        fh.write(json.dumps({"step": 4, "loss": 0.01, "k": 9}) + "\n")
    assert glance(run)[0] == summarize_with_x(run)[1] != expected
    assert glance(run)[0]["loss"].latest == 0.01
    side.write_text('{"format": 1, "offset": 3, "head": "x", "summary": {}}')  # damaged
    assert glance(run)[0]["k"].max == 9
    side.unlink()
    assert glance(run)[0]["k"].max == 9
    path.write_text("")
    assert glance(run) == ({}, True)


def test_the_runs_table_sorts_numbers_then_text_and_missing_values_last() -> None:
    from orbit.web.table import Column, param_keys, sort_rows

    rows: list[Any] = [
        {"id": "1", "params": {"lr": "1e-3", "opt": "sgd"}},
        {"id": "2", "params": {"lr": "auto"}},
        {"id": "3", "params": {}},
        {"id": "4", "params": {"lr": "0.1"}},
        {"id": "5", "params": {"lr": 3e-4}},
    ]
    assert Column.parse("param:lr") == Column("param", "lr") and Column.parse("lr") is None
    assert Column.parse("max:train/loss").label == "train/loss max"  # type: ignore[union-attr]
    lr = Column("param", "lr")
    assert [r["id"] for r in sort_rows(rows, lr, False, None)] == ["5", "1", "4", "2", "3"]
    assert [r["id"] for r in sort_rows(rows, lr, True, None)] == ["2", "4", "1", "5", "3"]
    assert param_keys(rows) == ["lr", "opt"]  # the most common first
