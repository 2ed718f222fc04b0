"""The one rule for "judged by which metric, which way" (orbit/review/objective.py), on the
shapes an agent met: an accuracy logged after a constant counter, a metric whose name says
nothing, a direction against the name, a group with nothing comparable."""

from __future__ import annotations

import pytest

from orbit.errors import NotFoundError, UsageError
from orbit.review.objective import direction_by_name, parse_metric_option, pick, resolve
from orbit.store.groups import Declared, parse_objective

# The final metrics of the agent trial's Naive-Bayes runs: per chunk {step, train_docs,
# dev_acc, dev_nll}, then {test_acc, test_nll}. train_docs is 600 in every run.
TRIAL = [
    {"step": 5, "train_docs": 600, "dev_acc": d, "dev_nll": 1 - d, "test_acc": t, "test_nll": 1 - t}
    for d, t in [(0.79, 0.78), (0.97, 0.98), (0.96, 0.97), (0.78, 0.77)]
]


@pytest.mark.parametrize(
    ("name", "way"),
    [
        ("loss", "min"), ("val/loss", "min"), ("test_error", "min"), ("perplexity", "min"),
        ("dev_nll", "min"), ("wer", "min"), ("mape", "min"), ("valBpb", "min"),
        ("acc", "max"), ("test_acc", "max"), ("accuracy", "max"), ("f1_macro", "max"),
        ("auc", "max"), ("bleu", "max"), ("mean_reward", "max"), ("episode_return", "max"),
        ("score", "max"), ("pass@1", "max"), ("map", "max"), ("top1", "max"),
        ("train_docs", None), ("lr", None), ("foo", None), ("acc_loss", None), ("klass", None),
    ],
)  # fmt: skip
def test_direction_by_name(name: str, way: str | None) -> None:
    assert direction_by_name(name) == way


def test_a_constant_counter_logged_first_is_never_the_objective() -> None:
    chosen, passed = pick(TRIAL)
    assert chosen == "test_acc"
    assert passed["step"] == passed["train_docs"] == "an axis or a counter"
    assert passed["dev_acc"] == "test_acc first (test, then validation, then training metrics)"
    o = resolve(TRIAL, group="nb")
    assert (o.metric, o.direction, o.ok) == ("test_acc", "max", True)
    assert o.text() == "test_acc, highest is better (picked, direction by its name)"


def test_a_constant_value_is_passed_over_for_one_that_varies() -> None:
    runs = [{"acc": 0.5, "loss": x} for x in (0.3, 0.2)]
    chosen, passed = pick(runs)
    assert chosen == "loss" and passed["acc"] == "the same in every run (0.5)"


def test_more_runs_win_over_the_split() -> None:
    runs = [{"val_loss": 0.3, "test_loss": 0.2}, {"val_loss": 0.2}]
    assert pick(runs)[0] == "val_loss"


def test_nothing_qualifies_says_so_and_ranks_nothing() -> None:
    o = resolve([{"step": 3, "train_docs": 600}, {"step": 3, "train_docs": 600}], group="nb")
    assert o.metric is None and not o.ok
    assert o.problem == (
        "not ranked: no logged metric qualifies as the objective (step: an axis or a counter; "
        "train_docs: an axis or a counter); declare one: orbit group objective nb METRIC:max|min"
    )
    with pytest.raises(NotFoundError):
        o.require()
    assert resolve([]).problem == "not ranked: no succeeded run logged a numeric metric"


def test_declared_wins_over_the_pick_and_a_given_metric_over_both() -> None:
    declared = Declared("dev_nll", "min")
    o = resolve(TRIAL, declared=declared, group="nb")
    assert (o.metric, o.direction) == ("dev_nll", "min")
    assert o.text() == "dev_nll, lowest is better (declared for group nb)"
    given = resolve(TRIAL, metric="test_acc", declared=declared, group="nb")
    assert given.text() == "test_acc, highest is better (given, direction by its name)"
    same = resolve(TRIAL, metric="dev_nll", declared=Declared("dev_nll", "max"))
    assert (same.direction, same.direction_why) == ("max", "declared")


def test_a_direction_against_the_name_is_kept_with_a_warning() -> None:
    o = resolve(TRIAL, metric="test_acc", direction="min")
    assert o.ok and o.direction == "min"
    assert o.warning == (
        "test_acc:min goes against its name (highest is better by the name); "
        "ranked lowest first as given"
    )


def test_unknown_metric_and_a_name_that_says_nothing() -> None:
    missing = resolve(TRIAL, metric="tset_acc")
    assert missing.problem == (
        "'tset_acc' was logged by none of the 4 succeeded runs "
        "(they logged: step, train_docs, dev_acc, dev_nll, test_acc, test_nll)"
    )
    with pytest.raises(NotFoundError):
        missing.require()
    silent = resolve(TRIAL, metric="train_docs")
    assert silent.problem == (
        "say which way is better for 'train_docs': train_docs:max or train_docs:min "
        "(its name does not say)"
    )
    with pytest.raises(UsageError):
        silent.require()
    assert resolve(TRIAL, metric="train_docs", direction="max").ok
    declared = resolve(TRIAL, declared=Declared("reward", "max"), group="nb")
    assert declared.problem is not None
    assert declared.problem.startswith("group nb's declared objective 'reward' was logged by none")


def test_parsing_metric_options() -> None:
    assert parse_objective("test_acc:max") == ("test_acc", "max")
    assert parse_objective("loss") == ("loss", None)
    assert parse_objective("a:b:min") == ("a:b", "min")
    for bad in ("", ":max", "acc:best", "my acc:max"):
        with pytest.raises(UsageError):
            parse_objective(bad)
    assert parse_metric_option("acc", False) == ("acc", "min")
    assert parse_metric_option(None, True) == (None, "max")
    with pytest.raises(UsageError, match="disagree"):
        parse_metric_option("acc:max", False)
