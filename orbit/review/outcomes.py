"""What came of a failure: whether other runs of its settings succeeded, and what changed
between the failed runs and those that succeeded.

A setting is a run's group and its params without the seed-like keys (`best.setting_of`); a
run without params is a setting of its own with its command, and a run without a group is
compared with no other run. For each setting of a failure's runs, its newest succeeded runs
(COMPARED of them) are compared with the failed ones on what they asked for (changes.py). A
succeeded run that asked for something else than every failed run it is compared with is a
fix, and names what changed from the closest of them (fewest changes, then the same seed, then
the newest); one that asked for exactly what a failed run did succeeded with nothing changed:
the failure depends on the seed or, with the same seed too, is flaky. A succeeded run is
compared with the failed runs of its own seed and the newest few failed runs that asked for
different things (BASES each), so a long history costs a bounded number of comparisons.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orbit.review.best import params_text, setting_of
from orbit.review.changes import Request, change_words, changes, params_of
from orbit.review.objective import number
from orbit.store.model import Run, RunState
from orbit.store.runs import id_key

FIXED = "fixed"  # a run of the setting succeeded with something changed
SEED_DEPENDENT = "seed-dependent"  # runs with other seeds succeeded, nothing else changed
FLAKY = "flaky"  # a run with the same seed succeeded, nothing changed
UNRESOLVED = "unresolved"  # no run of the setting succeeded
MIXED = "mixed"  # the settings of one failure came to different ends
SHOWN_SETTINGS = 3  # settings given a line of their own; the rest are counted
MAX_SETTINGS = 20  # settings listed in the JSON
SHOWN_ID_PARTS = 8  # runs or ranges of runs named in a line
SHOWN_FIXES = 2  # kinds of fix named in a setting's text; the rest are counted
MAX_SUCCESSES = 10  # kinds of success listed in a setting's JSON
COMPARED = 20  # a setting's newest succeeded runs compared with its failed runs
BASES = 2  # failed runs of its seed, and others, each succeeded run is compared with
# A setting: (group, its params without the seed-like keys, sorted, as text; the command of a
# run without params, else None).
Setting = tuple[str, tuple[tuple[str, str], ...], tuple[str, ...] | None]


def setting_key(group: Any, params: Any, command: Any) -> Setting | None:
    """The setting a run belongs to (from its run.yaml or its index row); None without a
    group."""
    if not group:
        return None
    if not isinstance(params, dict) or not params:
        return (str(group), (), tuple(str(a) for a in command or ()))
    return (
        str(group),
        tuple(sorted((str(k), str(v)) for k, v in setting_of(params).items())),
        None,
    )


def run_setting(run: Run) -> Setting | None:
    spec = run.spec
    return setting_key(spec.get("group"), spec.get("params"), spec.get("command"))


def succeeded_by_setting(runs: Iterable[Run]) -> dict[Setting, list[Run]]:
    """The succeeded runs among `runs`, by setting (oldest id first)."""
    out: dict[Setting, list[Run]] = {}
    for run in runs:
        if run.status.get("state") != RunState.SUCCEEDED.value:
            continue
        key = run_setting(run)
        if key is not None:
            out.setdefault(key, []).append(run)
    for members in out.values():
        members.sort(key=lambda r: id_key(r.id))
    return out


# --- the outcome ---------------------------------------------------------------------------
@dataclass
class Success:
    """Succeeded runs of one setting that changed the same things (none: nothing changed)."""

    run_ids: list[str]
    changed: dict[str, dict[str, Any]]
    compared_with: str  # the failed run the first of them was compared with
    same_seed: bool = False  # nothing changed, not even the seed
    peak_mem_bytes: int | None = None

    @property
    def text(self) -> str:
        runs = runs_text(self.run_ids)
        if self.changed:
            return f"succeeded {change_words(self.changed, self.peak_mem_bytes)}, {runs}"
        if self.same_seed:
            return f"succeeded with nothing changed, not even the seed (flaky), {runs}"
        n = len(self.run_ids)
        other = f"{n} other run{'s' if n != 1 else ''} of the same setting"
        return f"{other} succeeded with nothing changed (seed-dependent), {runs}"

    def to_json(self) -> dict[str, Any]:
        return {
            "run_ids": self.run_ids,
            "changed": self.changed,
            "compared_with": self.compared_with,
            "same_seed": self.same_seed,
            "peak_mem_bytes": self.peak_mem_bytes,
        }


@dataclass
class SettingOutcome:
    params: dict[str, Any]
    failed: list[str]
    succeeded: list[Success] = field(default_factory=list)  # fixes first
    succeeded_total: int = 0  # succeeded runs of the setting, compared or not
    compared: bool = True  # False for runs without a group

    @property
    def status(self) -> str:
        if any(s.changed for s in self.succeeded):
            return FIXED
        if any(s.same_seed for s in self.succeeded):
            return FLAKY
        return SEED_DEPENDENT if self.succeeded else UNRESOLVED

    @property
    def text(self) -> str:
        if not self.compared:
            return "a run without a group: not compared with other runs"
        if not self.succeeded:
            return "no run of this setting succeeded"
        fixes = [s for s in self.succeeded if s.changed]
        parts = [s.text for s in fixes[:SHOWN_FIXES]]
        more = sum(len(s.run_ids) for s in fixes[SHOWN_FIXES:])
        if more:
            parts.append(f"{more} more run{'s' if more != 1 else ''} succeeded with other changes")
        parts += [s.text for s in self.succeeded if not s.changed]
        if self.succeeded_total > COMPARED:
            parts.append(
                f"of {self.succeeded_total} succeeded runs, the newest {COMPARED} compared"
            )
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "params": self.params,
            "status": self.status,
            "failed": self.failed,
            "succeeded": [s.to_json() for s in self.succeeded[:MAX_SUCCESSES]],
            "succeeded_total": self.succeeded_total,
            "text": self.text,
        }


@dataclass
class Outcome:
    settings: list[SettingOutcome]

    @property
    def status(self) -> str:
        found = {s.status for s in self.settings}
        return found.pop() if len(found) == 1 else MIXED if found else UNRESOLVED

    @property
    def lines(self) -> list[str]:
        """One line per setting (`→ succeeded at 1 GiB, runs 25–27`), none when no setting
        of the failure has a succeeded run: it is still a failure to look into."""
        if self.status == UNRESOLVED:
            return []
        if len(self.settings) == 1:
            return [f"→ {self.settings[0].text}"]
        labels = _labels([s.params for s in self.settings])
        out = [f"→ {label}: {s.text}" for label, s in zip(labels, self.settings, strict=True)]
        if len(out) > SHOWN_SETTINGS:
            more = len(out) - SHOWN_SETTINGS
            out = [*out[:SHOWN_SETTINGS], f"→ … {more} more setting{'s' if more != 1 else ''}"]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "lines": self.lines,
            "settings": [s.to_json() for s in self.settings[:MAX_SETTINGS]],
            "settings_total": len(self.settings),
        }


def outcome(
    failed: Sequence[Run],
    succeeded: Mapping[Setting, list[Run]],
    requests: dict[str, Request] | None = None,
) -> Outcome:
    """The outcome of the failed runs of one failure, given the succeeded runs by setting
    (`succeeded_by_setting`). `requests` (run id → Request) is filled as runs are read, so
    the outcomes of several failures read each run once."""
    requests = {} if requests is None else requests
    settings: dict[Setting | None, list[Run]] = {}
    for run in sorted(failed, key=lambda r: id_key(r.id)):
        settings.setdefault(run_setting(run), []).append(run)
    out = []
    for key, members in settings.items():
        if key is None:  # runs without a group: each a setting of its own params
            for run in members:
                out.append(SettingOutcome(setting_of(params_of(run)), [run.id], compared=False))
            continue
        found = SettingOutcome(setting_of(params_of(members[0])), [r.id for r in members])
        of_setting = succeeded.get(key) or []
        found.succeeded_total = len(of_setting)
        found.succeeded = _successes(members, of_setting[-COMPARED:], requests)
        out.append(found)
    return Outcome(out)


def _successes(
    failed: list[Run], succeeded: list[Run], requests: dict[str, Request]
) -> list[Success]:
    def request(run: Run) -> Request:
        if run.id not in requests:
            requests[run.id] = Request.of(run)
        return requests[run.id]

    newest = sorted(failed, key=lambda r: id_key(r.id), reverse=True)
    by_seed: dict[str, list[Run]] = {}
    distinct: dict[Any, Run] = {}  # the newest failed run of each request (seed apart)
    for run in newest:
        r = request(run)
        by_seed.setdefault(r.params, []).append(run)
        distinct.setdefault((r.values, r.env, r.template), run)
    others = list(distinct.values())[:BASES]
    groups: dict[str, Success] = {}
    for run in succeeded:
        mine = request(run)
        bases = [*by_seed.get(mine.params, [])[:BASES], *others]
        order: dict[str, int] = {}  # the same seed first, then the newest
        for i, f in enumerate(bases):
            order.setdefault(f.id, i)
        changed, base = min(
            ((changes(request(f), mine), f) for f in bases),
            key=lambda cf: (len(cf[0]), order[cf[1].id]),
        )
        same_seed = not changed and request(base).params == mine.params
        key = json.dumps([changed, same_seed], sort_keys=True, default=str)
        peak = peak_bytes(run)
        s = groups.get(key)
        if s is None:
            groups[key] = Success([run.id], changed, base.id, same_seed, peak)
        else:
            s.run_ids.append(run.id)
            if peak and (s.peak_mem_bytes or 0) < peak:
                s.peak_mem_bytes = peak
    # Fixes first, those of the most runs first, then the newest; then what succeeded with
    # nothing changed.
    return sorted(
        groups.values(),
        key=lambda s: (not s.changed, -len(s.run_ids), _newest_first(s.run_ids[-1])),
    )


def _newest_first(run_id: str) -> tuple[int, str]:
    n, text = id_key(run_id)
    return (-n, text)


def peak_bytes(run: Run) -> int | None:
    """The run's measured memory peak (status.yaml `peaks.mem_bytes`), None when unknown."""
    peaks = run.status.get("peaks")
    value = number(peaks.get("mem_bytes")) if isinstance(peaks, dict) else None
    return int(value) if value else None


def _labels(settings: list[dict[str, Any]]) -> list[str]:
    """Each setting by the params in which it differs from the failure's other settings."""
    keys = {k for p in settings for k in p}
    same = {k for k in keys if len({repr(p.get(k)) for p in settings}) == 1}
    return [params_text({k: v for k, v in p.items() if k not in same} or p) for p in settings]


# --- words --------------------------------------------------------------------------------
def runs_text(ids: Sequence[str]) -> str:
    """`run 25`, `runs 2, 3`, `runs 25–27, 30`: ranges for three or more consecutive ids."""
    ordered = sorted(ids, key=id_key)
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while (
            j + 1 < len(ordered)
            and ordered[j + 1].isdigit()
            and ordered[j].isdigit()
            and int(ordered[j + 1]) == int(ordered[j]) + 1
        ):
            j += 1
        if j - i >= 2:
            parts.append(f"{ordered[i]}–{ordered[j]}")
        else:
            parts.extend(ordered[i : j + 1])
        i = j + 1
    shown = ", ".join(parts[:SHOWN_ID_PARTS]) + (", …" if len(parts) > SHOWN_ID_PARTS else "")
    return ("run " if len(ordered) == 1 else "runs ") + shown
