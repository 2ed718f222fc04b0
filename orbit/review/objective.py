"""Which metric a set of runs is judged by, and which way is better: the one rule behind
`best`, `compare`, `lessons`, `ps --sort`, group notifications and the web.

In order:
1. a metric given on the command line (or the page), with its direction if given;
2. the group's declared objective (`--objective METRIC:max` on sweep or run, or
   `orbit group objective GROUP METRIC:max`; store/groups.py);
3. else a main metric picked from what the succeeded runs logged. Only a key whose name says
   which way is better qualifies (loss, error, perplexity, … lower; acc, f1, auc, reward,
   score, … higher: DIRECTION_WORDS), never an axis or a counter (step, epoch, iter, count,
   time, lr, …: NOT_AN_OBJECTIVE), and never a key with one value in every run. Of those,
   the one the most runs logged; then a test metric before a validation one before one with
   no split, a training metric last; then the first logged. Where none qualifies, nothing
   is ranked and the answer says why.

A direction given with a metric wins; else the declared one (for the declared metric);
else the name's. A direction that goes against the name is kept, with a warning. A metric
whose name says nothing and that no one gave a direction for is not ranked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orbit.errors import CorruptError, NotFoundError, UsageError
from orbit.human import fmt_metric
from orbit.review.parse import number
from orbit.store import groups
from orbit.store.groups import Declared
from orbit.store.home import Home

# A word of the name (split at `_`, `/`, `.`, `-`, spaces and camelCase) that starts with one
# of these says which way is better.
HIGHER_WORDS = ("acc", "accuracy", "auc", "auroc", "bleu", "chrf", "f1", "fscore", "iou",
                "map", "mrr", "ndcg", "pass", "precision", "recall", "return", "reward", "r2",
                "rouge", "score", "solved", "success", "top1", "top5", "win")  # fmt: skip
LOWER_WORDS = ("bpb", "bpd", "cer", "cost", "dist", "distance", "err", "error", "fid",
               "kl", "loss", "mae", "mape", "mse", "nll", "perplexity", "ppl", "regret",
               "rmse", "wer")  # fmt: skip
# A word that makes a key an axis, a counter or a setting, never an objective.
NOT_AN_OBJECTIVE = frozenset({
    "step", "steps", "epoch", "epochs", "iter", "iters", "iteration", "iterations", "it",
    "batch", "batches", "count", "counts", "num", "n", "idx", "index", "time", "timestamp",
    "seconds", "secs", "sec", "ms", "elapsed", "duration", "wall", "lr", "learning",
    "tokens", "samples", "examples", "docs", "seen", "size", "len", "length", "memory",
    "mem", "gpu", "cpu", "throughput",
})  # fmt: skip
SPLIT_RANK = {"test": 0, "eval": 1, "evaluation": 1, "val": 1, "valid": 1, "validation": 1,
              "dev": 1, "holdout": 1, "train": 3, "training": 3}  # fmt: skip
NO_SPLIT_RANK = 2
_WORDS = re.compile(r"[_/.\-\s:@]+|(?<=[a-z0-9])(?=[A-Z])")


def words(name: str) -> list[str]:
    return [w for w in _WORDS.split(name) if w]


def direction_by_name(name: str) -> str | None:
    """`max`, `min`, or None when the name does not say (or says both: `acc_loss`)."""
    found = {way for w in words(name) if (way := _word_direction(w.lower()))}
    return found.pop() if len(found) == 1 else None


def _word_direction(word: str) -> str | None:
    """A word that is a stem says so; else one that starts with a stem of three letters or
    more (`acc` covers accuracy and acc1, `err` errors; `kl` and `f1` must be whole)."""
    if word in HIGHER_WORDS:
        return "max"
    if word in LOWER_WORDS:
        return "min"
    higher = any(len(s) >= 3 and word.startswith(s) for s in HIGHER_WORDS)
    lower = any(len(s) >= 3 and word.startswith(s) for s in LOWER_WORDS)
    if higher == lower:
        return None
    return "max" if higher else "min"


def way_text(direction: str | None) -> str:
    return {"max": "highest is better", "min": "lowest is better"}.get(direction or "", "")


@dataclass(frozen=True)
class Objective:
    """The answer to "judged by what, which way": the metric (None when nothing qualifies),
    the direction (None when nothing says), why each, and what was passed over."""

    metric: str | None
    direction: str | None
    metric_why: str  # given, declared, picked
    direction_why: str  # given, declared, by its name, unknown
    passed_over: dict[str, str] = field(default_factory=dict)  # key -> why not picked
    problem: str | None = None  # why nothing can be ranked
    warning: str | None = None  # a direction against the name
    group: str | None = None

    @property
    def ok(self) -> bool:
        return self.metric is not None and self.direction is not None and self.problem is None

    @property
    def maximize(self) -> bool:
        return self.direction == "max"

    @property
    def why(self) -> str:
        """`declared for group nb`, `given; direction by its name`, `picked: …`."""
        if self.metric_why == "declared":
            where = f" for group {self.group}" if self.group else ""
            if self.direction_why == "declared":
                return f"declared{where}"
            return f"metric declared{where}, direction {self.direction_why}"
        if self.metric_why == "given":
            return (
                "given"
                if self.direction_why == "given"
                else f"given, direction {self.direction_why}"
            )
        return f"picked, direction {self.direction_why}"

    @property
    def short_why(self) -> str:
        """`declared`, `given` or `by its name`: for a label with little room."""
        if self.direction_why in ("declared", "given"):
            return self.direction_why
        return "given" if self.metric_why == "given" else "by its name"

    def text(self) -> str:
        """`test_acc, highest is better (declared for group nb)`; the problem when there is one."""
        if self.problem:
            return self.problem
        return f"{self.metric}, {way_text(self.direction)} ({self.why})"

    def require(self) -> Objective:
        """Self when it can rank; else the problem as an error."""
        if self.problem is None:
            return self
        if self.metric is not None and self.direction is None:
            raise UsageError(self.problem)  # a name that says nothing: the caller must say
        raise NotFoundError(self.problem)

    @classmethod
    def from_json(cls, d: Mapping[str, Any], group: str | None = None) -> Objective:
        return cls(
            d.get("metric"),
            d.get("direction"),
            str(d.get("metric_why") or "picked"),
            str(d.get("direction_why") or "unknown"),
            dict(d.get("passed_over") or {}),
            d.get("problem"),
            d.get("warning"),
            d.get("group", group),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "metric": self.metric,
            "direction": self.direction,
            "maximize": self.maximize if self.direction else None,
            "why": self.why if self.metric else None,
            "metric_why": self.metric_why,
            "direction_why": self.direction_why,
            "passed_over": self.passed_over,
            "problem": self.problem,
            "warning": self.warning,
        }


def logged_keys(finals: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each numeric key the runs' final metrics hold, with how many runs hold it, in the
    order the runs first logged them."""
    out: dict[str, int] = {}
    for values in finals:
        for key, value in values.items():
            if number(value) is not None:
                out[key] = out.get(key, 0) + 1
    return out


def passed_over(key: str, finals: Sequence[Mapping[str, Any]]) -> str | None:
    """Why `key` cannot be the main metric, or None when it can."""
    ws = [w.lower() for w in words(key)]
    if any(w in NOT_AN_OBJECTIVE for w in ws):
        return "an axis or a counter"
    if direction_by_name(key) is None:
        return "its name does not say which way is better"
    values = {number(f.get(key)) for f in finals} - {None}
    if len(values) == 1 and sum(number(f.get(key)) is not None for f in finals) > 1:
        (only,) = values
        return f"the same in every run ({only:g})"
    return None


def _split_rank(key: str) -> int:
    ws = [w.lower() for w in words(key)]
    return min((SPLIT_RANK[w] for w in ws if w in SPLIT_RANK), default=NO_SPLIT_RANK)


def pick(finals: Sequence[Mapping[str, Any]]) -> tuple[str | None, dict[str, str]]:
    """The main metric of the runs' final metrics (see the module's rule) and the keys passed
    over with why."""
    counts = logged_keys(finals)
    skipped: dict[str, str] = {}
    fit: list[tuple[int, int, int, str]] = []
    for order, (key, n) in enumerate(counts.items()):
        why = passed_over(key, finals)
        if why:
            skipped[key] = why
        else:
            fit.append((-n, _split_rank(key), order, key))
    if not fit:
        return None, skipped
    fit.sort()
    chosen = fit[0][3]
    for _, rank, _, key in fit[1:]:
        if counts[key] < counts[chosen]:
            skipped[key] = f"logged by {counts[key]} runs, {chosen} by {counts[chosen]}"
        elif rank > _split_rank(chosen):
            skipped[key] = f"{chosen} first (test, then validation, then training metrics)"
        else:
            skipped[key] = f"{chosen} first (logged earlier)"
    return chosen, skipped


def resolve(
    finals: Iterable[Mapping[str, Any]],
    *,
    metric: str | None = None,
    direction: str | None = None,
    declared: Declared | None = None,
    group: str | None = None,
) -> Objective:
    """The objective of runs whose final metrics (those of the succeeded runs) are `finals`:
    `metric`/`direction` as given (by a person or an agent), else `declared` (the group's),
    else picked. Never raises: what cannot be ranked is the answer's `problem`."""
    finals = list(finals)
    if metric is not None:
        why = "given"
        if direction is not None:
            d_why = "given"
        elif declared is not None and declared.metric == metric:
            direction, d_why = declared.direction, "declared"
        else:
            direction, d_why = direction_by_name(metric), "by its name"
        return _checked(Objective(metric, direction, why, d_why, group=group), finals)
    if declared is not None:
        way: str | None = direction or declared.direction
        d_why = "given" if direction else "declared"
        found = Objective(declared.metric, way, "declared", d_why, group=group)
        return _checked(found, finals)
    chosen, skipped = pick(finals)
    if chosen is None:
        problem = _nothing_qualifies(skipped, group)
        return Objective(None, None, "picked", "unknown", skipped, problem, group=group)
    way = direction or direction_by_name(chosen)
    found = Objective(
        chosen, way, "picked", "given" if direction else "by its name", skipped, group=group
    )
    return _checked(found, finals)


def _checked(o: Objective, finals: list[Mapping[str, Any]]) -> Objective:
    """`o` with its problem (a metric no run logged, no direction) and warning (against the
    name) filled in."""
    metric = str(o.metric)
    problem = warning = None
    logged = logged_keys(finals)
    if metric not in logged:
        whose = f"group {o.group}'s declared objective " if o.metric_why == "declared" else ""
        if not finals:
            problem = f"{whose}{metric!r}: no succeeded run to judge"
        else:
            keys = ", ".join(list(logged)[:12]) or "no numeric metric"
            problem = (
                f"{whose}{metric!r} was logged by none of the {len(finals)} succeeded runs "
                f"(they logged: {keys})"
            )
    elif o.direction is None:
        problem = (
            f"say which way is better for {metric!r}: {metric}:max or {metric}:min "
            "(its name does not say)"
        )
    by_name = direction_by_name(metric)
    if o.direction and by_name and by_name != o.direction and o.direction_why != "by its name":
        warning = (
            f"{metric}:{o.direction} goes against its name ({way_text(by_name)} by the name); "
            f"ranked {'highest' if o.direction == 'max' else 'lowest'} first as "
            f"{o.direction_why}"
        )
    if problem is None and warning is None:
        return o
    return Objective(
        o.metric,
        o.direction,
        o.metric_why,
        o.direction_why,
        o.passed_over,
        problem,
        warning,
        o.group,
    )


def _nothing_qualifies(skipped: Mapping[str, str], group: str | None) -> str:
    if not skipped:
        return "not ranked: no succeeded run logged a numeric metric"
    shown = "; ".join(f"{k}: {why}" for k, why in list(skipped.items())[:6])
    target = group or "GROUP"
    return (
        f"not ranked: no logged metric qualifies as the objective ({shown}); declare one: "
        f"orbit group objective {target} METRIC:max|min"
    )


def parse_metric_option(
    text: str | None, maximize: bool | None = None
) -> tuple[str | None, str | None]:
    """`--metric NAME[:max|min]` with `--max`/`--min` (maximize True/False) as (metric,
    direction); a direction in both that disagrees is an error."""
    from orbit.store.groups import parse_objective

    if text is None:
        if maximize is not None:
            return None, "max" if maximize else "min"
        return None, None
    metric, way = parse_objective(text, "--metric")
    flag = None if maximize is None else ("max" if maximize else "min")
    if way and flag and way != flag:
        raise UsageError(f"--metric {text!r} and --{flag} disagree: give the direction once")
    return metric, way or flag


def declared_of(home: Home, group: str | None) -> tuple[Declared | None, str | None]:
    """The group's declared objective and, when its group.yaml cannot be read, a warning
    that names the file and the fix (the objective is then left out, never guessed)."""
    try:
        return groups.objective(home, group), None
    except CorruptError as exc:
        return None, (
            f"{exc}: its objective is ignored; declare it again with "
            f"orbit group objective {group} METRIC:max|min"
        )


def metric_text(latest: Mapping[str, Any], declared: Declared | None = None) -> str:
    """`loss 0.0211`: a run's main metric (its group's declared objective, else the one
    picked from its own metrics) and its latest value; "" without one. The web's runs list
    and the Feishu bot's /runs show it."""
    key = resolve([latest], declared=declared).metric
    value = number(latest.get(key)) if key else None
    return f"{key} {fmt_metric(value)}" if key and value is not None else ""
