"""Filter expressions over runs: `lr<1e-3 loss<0.3 state=failed tag:baseline opt=sgd`.

The one parser and matcher of them (the web's runs list and `orbit ps --where`). An expression
is terms separated by spaces, all of which must hold (AND). A term is

- `tag:NAME` (the run has that tag) or `tag:NAME=VALUE`;
- `KEY OP VALUE`, OP one of `=` (`==`), `!=`, `<`, `<=`, `>`, `>=` or `~` (contains, any case).
  `=` and `!=` take alternatives separated by commas (`state=failed,lost`). The ordering
  operators need a number and hold for a numeric value only.

KEY is a field (`id`, `name`, `state`, `group`, `folder`, `image`), else the run's param of
that name, else its metric of that name (the final value). A prefix says which:
`param:KEY`, `metric:KEY` (or `final:KEY`), `min:KEY`, `max:KEY` (the metric's minimum or
maximum). A run without the key matches no term on it. Quote a value holding spaces
(`name="my run"`). Values compare as numbers when both sides are numbers, else as text.
"""

from __future__ import annotations

import operator
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from orbit.errors import UsageError
from orbit.review.parse import number

FIELDS = ("id", "name", "state", "group", "folder", "image")
STATS = {"final": "latest", "metric": "latest", "min": "min", "max": "max"}
KINDS = ("param", *STATS)
# The longest operators first, so `<=` is not read as `<` and a value `=…`.
TERM = re.compile(r"^(?P<key>[^<>=!~]+?)(?P<op><=|>=|!=|==|=|<|>|~)(?P<value>.*)$", re.S)
ORDERING = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
MAX_TERMS = 64

# A run's metrics as `where` reads them: key -> an object with `latest`, `min` and `max`.
MetricsOf = Callable[[], Mapping[str, Any]]


@dataclass(frozen=True)
class Term:
    kind: str  # "tag", "field", "param", "final", "min", "max", or "auto" (field, param, metric)
    key: str
    op: str = ""  # "" for `tag:NAME`
    values: tuple[str, ...] = ()
    number: float | None = None  # the value as a number, for the ordering operators

    @property
    def needs_metrics(self) -> bool:
        return self.kind in STATS or self.kind == "auto"


@dataclass(frozen=True)
class Where:
    """A parsed expression; `Where(())` matches every run."""

    terms: tuple[Term, ...] = ()
    text: str = ""

    @property
    def needs_metrics(self) -> bool:
        return any(t.needs_metrics for t in self.terms)

    def matches(self, row: Mapping[str, Any], metrics: MetricsOf | None = None) -> bool:
        """Whether the run (an index row: `state`, `name`, `params`, `tags`, …) satisfies every
        term; `metrics` is called at most once, and only when a term needs the run's metrics."""
        cache: list[Mapping[str, Any]] = []

        def metrics_once() -> Mapping[str, Any]:
            if not cache:
                cache.append(metrics() if metrics is not None else {})
            return cache[0]

        return all(_holds(t, row, metrics_once) for t in self.terms)


def parse(text: str) -> Where:
    """The expression `text`; a UsageError with a one-line message when it is not one."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"bad filter expression: {exc}") from None
    if len(words) > MAX_TERMS:
        raise UsageError(f"bad filter expression: more than {MAX_TERMS} terms")
    return Where(tuple(_term(w) for w in words), text.strip())


def _term(word: str) -> Term:
    if word.startswith("tag:"):
        name, sep, value = word[4:].partition("=")
        if not name:
            raise UsageError(f"bad filter term {word!r}: name the tag (tag:NAME or tag:NAME=VALUE)")
        return Term("tag", name, "=" if sep else "", (value,) if sep else ())
    found = TERM.match(word)
    if not found:
        raise UsageError(f"bad filter term {word!r}: expected KEY=VALUE, KEY<NUMBER, … or tag:NAME")
    key, op, value = found["key"], found["op"], found["value"]
    kind, sep, rest = key.partition(":")
    if sep and kind in KINDS:
        if not rest:
            raise UsageError(f"bad filter term {word!r}: name the key after {kind}:")
        key = rest
    else:
        kind = "field" if key in FIELDS else "auto"
    op = "=" if op == "==" else op
    if not value:
        raise UsageError(f"bad filter term {word!r}: no value after {op!r}")
    if op in ORDERING:
        number = _number(value)
        if number is None:
            raise UsageError(f"bad filter term {word!r}: {op!r} needs a number, not {value!r}")
        return Term(kind, key, op, (value,), number)
    values = tuple(value.split(",")) if op in ("=", "!=") else (value,)
    return Term(kind, key, op, values)


def _number(value: Any) -> float | None:
    """A finite number from an int, a float (parse.number) or numeric text; None otherwise."""
    if isinstance(value, str):
        try:
            return number(float(value.strip()))
        except ValueError:
            return None
    return number(value)


def _holds(term: Term, row: Mapping[str, Any], metrics: MetricsOf) -> bool:
    if term.kind == "tag":
        tags = row.get("tags")
        if not isinstance(tags, Mapping) or term.key not in tags:
            return False
        return not term.op or str(tags[term.key]) == term.values[0]
    found, value = _value(term, row, metrics)
    return found and _compare(value, term)


def _value(term: Term, row: Mapping[str, Any], metrics: MetricsOf) -> tuple[bool, Any]:
    """(whether the run has the key, its value) for a term on a field, param or metric."""
    if term.kind == "field":
        value = row.get(term.key)
        return value is not None and value != "", value
    params = row.get("params")
    if term.kind in ("param", "auto") and isinstance(params, Mapping) and term.key in params:
        return True, params[term.key]
    if term.kind == "param":
        return False, None
    summary = metrics().get(term.key)
    if summary is None:
        return False, None
    return True, getattr(summary, STATS.get(term.kind, "latest"))


def _compare(value: Any, term: Term) -> bool:
    mine = _number(value)
    if term.op in ORDERING:
        return mine is not None and term.number is not None and ORDERING[term.op](mine, term.number)
    if term.op == "~":
        return term.values[0].lower() in str(value).lower()
    equal = any(_equal(value, mine, v) for v in term.values)
    return equal if term.op == "=" else not equal


def _equal(value: Any, mine: float | None, wanted: str) -> bool:
    """Equal as numbers when both are (`lr=0.001` holds for 1e-3), else as text."""
    number = _number(wanted)
    if mine is not None and number is not None:
        return mine == number
    return str(value) == wanted
