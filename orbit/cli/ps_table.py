"""The table `orbit ps` prints: each row's cells, and for a plain `orbit ps -a` the whole table
as a *template* that the listing snapshot keeps (store/listing.py), with only the SUBMITTED
column (an age, so it changes with the clock) left to fill in when it is shown.

Both give the same text for the same rows and clock: the template is `table` run once with
SUBMITTED blank, and filling it in pads every line's SUBMITTED slot as `table` would.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TextIO

from orbit.cli.common import column_widths, row_format, table
from orbit.human import human_seconds
from orbit.store.model import parse_iso

HEADERS = ("ID", "NAME", "STATE", "GROUP", "SUBMITTED", "RES", "REASON")
SUBMITTED = HEADERS.index("SUBMITTED")


def cells_of(rows: Iterable[dict[str, Any]]) -> list[list[Any]]:
    """Each listing row's cells: ID, NAME, STATE, GROUP, SUBMITTED (microseconds since the
    epoch, shown as an age, or the text to show), RES, REASON, and PARAMS (None: the run has
    none). Plain JSON values, so that a template can be made from them later."""
    from textwrap import shorten

    from orbit.store.excerpt import from_command

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    out: list[list[Any]] = []
    for row in rows:
        if "error" in row:
            out.append([row["id"], "", "unreadable", "", "", "", row["error"], None])
            continue
        state = str(row.get("state"))
        note = row.get("reason") or ""
        if state == "succeeded":
            note = ""
        elif row.get("error_line") and from_command(row.get("reason")):
            note = f"{note} — {shorten(row['error_line'], 80, placeholder=' …')}"
        if row.get("log_note") and state not in ("running", "starting"):
            # A running run's reason says what holds it; the note comes with the result.
            note = f"{note}; {row['log_note']}" if note else row["log_note"]
        when = parse_iso(row.get("submitted_at"))
        submitted: int | str = "-"
        if when is not None:
            delta = when - epoch  # exact, in whole microseconds
            submitted = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
        params = row.get("params")
        out.append(
            [
                str(row["id"]),
                str(row.get("name") or ""),
                state,
                str(row.get("group") or ""),
                submitted,
                f"{_num(row.get('cpus'))}c/{_num(row.get('mem_gb'))}G",
                str(note),
                params_text(params) if params else None,
            ]
        )
    return out


def render(
    out: TextIO, cells: list[list[Any]], now_us: int, extra: tuple[str, list[str]] | None = None
) -> None:
    """The table of `cells` as of `now_us`, with PARAMS when a run has params and `extra`
    (the sort metric's column) before REASON."""
    table(out, *_body(cells, [_age(c[SUBMITTED], now_us) for c in cells], extra))


def _body(
    cells: list[list[Any]],
    ages: list[str],
    extra: tuple[str, list[str]] | None = None,
    params: bool | None = None,
) -> tuple[list[str], list[list[str]]]:
    """The headers and rows `render` gives `table`, with `ages` in SUBMITTED; PARAMS when a
    run has params (or as `params` says)."""
    body = [
        [*c[:SUBMITTED], age, *c[SUBMITTED + 1 : 7]] for c, age in zip(cells, ages, strict=True)
    ]
    headers = list(HEADERS)
    columns = []
    if any(c[7] is not None for c in cells) if params is None else params:
        columns.append(("PARAMS", [c[7] or "" for c in cells]))
    if extra is not None:
        columns.append(extra)
    at = len(headers) - 1
    for title, column in reversed(columns):
        headers.insert(at, title)
        for row, cell in zip(body, column, strict=True):
            row.insert(at, cell)
    return headers, body


def template(cells: list[list[Any]], reuse: Reuse | None = None) -> dict[str, Any] | None:
    """`render`'s table of all of `cells` with SUBMITTED blank: `lines` (the header first),
    `at` (where SUBMITTED starts in every line), `submitted` (each row's SUBMITTED cell),
    and the `headers` and `widths` of its columns. None when a cell holds a line break (a
    row would not be one line).

    `reuse`: lines of an older template (`reusable`), kept while the columns are as they
    were instead of being formatted again."""
    if reuse is not None:
        quick = reuse.template(cells)
        if quick is not None:
            return quick
    headers, body = _body(cells, [""] * len(cells))
    widths = column_widths(headers, body)
    fmt = row_format(widths)
    head = fmt.format(*headers).rstrip()
    lines = [head, *(fmt.format(*row).rstrip() for row in body)]
    if any("\n" in line for line in lines):
        return None
    return _template(head, lines, cells, headers, widths)


def _template(
    head: str, lines: list[str], cells: list[list[Any]], headers: list[str], widths: list[int]
) -> dict[str, Any]:
    return {
        "at": head.index("SUBMITTED"),
        "lines": lines,
        "submitted": [c[4] for c in cells],
        "headers": headers,
        "widths": widths,
    }


class Reuse:
    """What `template` may keep of an older one: its columns, and its line of each run whose
    cells did not change (`changed`: the ids of the others, and of runs gone or new)."""

    def __init__(self, tpl: dict[str, Any], cells: list[list[Any]], changed: set[str]) -> None:
        self.headers = tpl.get("headers")
        self.widths = tpl.get("widths")
        self.head = tpl["lines"][0]
        self.changed = changed
        pairs = zip(cells, tpl["lines"][1:], strict=True)
        self.lines = {c[0]: line for c, line in pairs if c[0] not in changed}
        self.before = [c for c in cells if c[0] in changed]

    def template(self, cells: list[list[Any]]) -> dict[str, Any] | None:
        """`template(cells)`, made by formatting only the changed rows, when it can be told
        from them alone that every column keeps its width (None: format them all)."""
        headers, widths = self.headers, self.widths
        if not (isinstance(headers, list) and isinstance(widths, list)):
            return None
        params = "PARAMS" in headers
        after = [c for c in cells if c[0] in self.changed]
        if any(c[7] is not None for c in after) != params and (
            not params or any(c[7] is not None for c in self.before)
        ):
            return None  # PARAMS may come or go
        blank = [""] * max(len(after), len(self.before))
        _, old_rows = _body(self.before, blank[: len(self.before)], params=params)
        _, new_rows = _body(after, blank[: len(after)], params=params)
        for i, width in enumerate(widths[:-1]):
            if any(len(r[i]) > width for r in new_rows):
                return None  # wider
            at_max = width > len(headers[i]) and any(len(r[i]) == width for r in old_rows)
            if at_max and not any(len(r[i]) == width for r in new_rows):
                return None  # perhaps narrower
        fmt = row_format(widths)
        new = {c[0]: fmt.format(*row).rstrip() for c, row in zip(after, new_rows, strict=True)}
        if any("\n" in line for line in new.values()):
            return None
        lines = [self.head]
        lines.extend(new[c[0]] if c[0] in new else self.lines[c[0]] for c in cells)
        return _template(self.head, lines, cells, headers, widths)


def is_template(value: Any) -> bool:
    """True for what `template` returns (a snapshot's section is checked before it is used)."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("at"), int)
        and isinstance(value.get("lines"), list)
        and isinstance(value.get("submitted"), list)
        and len(value["lines"]) == len(value["submitted"]) + 1
    )


def fill(out: TextIO, tpl: dict[str, Any], now_us: int) -> None:
    """Write a template's table as of `now_us`: what `render` writes for the same cells."""
    at, lines = tpl["at"], tpl["lines"]
    end = at + len("SUBMITTED")  # the blank column was as wide as its header
    ages = _ages(tpl["submitted"], now_us)
    width = max(len("SUBMITTED"), *map(len, ages)) if ages else len("SUBMITTED")
    text = [lines[0][:at] + "SUBMITTED".ljust(width) + lines[0][end:]]
    for line, age in zip(lines[1:], ages, strict=True):
        # A line that ends before its blank slot ended lost its padding to rstrip: so may
        # the age's.
        filled = line[:at].ljust(at) + age.ljust(width) + line[end:]
        text.append(filled if len(line) > end else filled.rstrip())
    out.write("\n".join(text) + "\n")


def _ages(submitted: list[int | str], now_us: int) -> list[str]:
    """`_age` of each; an age of an hour or more is shown to the minute (human_seconds:
    "1h05m", "2d03h"), so it is computed once per minute of age, not once per run."""
    known: dict[int, str] = {}
    out = []
    for s in submitted:
        if isinstance(s, str) or now_us - s < 3_600_000_000:
            out.append(_age(s, now_us))
            continue
        minute = (now_us - s) // 60_000_000
        age = known.get(minute)
        if age is None:
            age = known[minute] = _age(s, now_us)
        out.append(age)
    return out


def _age(submitted: int | str, now_us: int) -> str:
    if isinstance(submitted, str):
        return submitted
    return human_seconds((now_us - submitted) / 1_000_000) + " ago"


def _num(value: Any) -> str:
    if value is None:
        return "?"
    f = float(value)
    return str(int(f)) if f == int(f) else f"{f:g}"


def params_text(params: Any) -> str:
    if not isinstance(params, dict):
        return ""
    return " ".join(f"{k}={v}" for k, v in params.items())
