"""orbit wait ID… | -g GROUP: block until the runs finish; exit 1 if any did not succeed."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TextIO

from orbit.cli.common import (
    add_json,
    check_runs_or_group,
    group_members,
    positive_float,
    print_json,
    runs_or_group_arguments,
)
from orbit.cli.watch import POLL_SECONDS, QueueNotes, SideTicks, StatusWatch
from orbit.env import Env
from orbit.errors import CorruptError, ExitCode, NotFoundError
from orbit.store.batches import pending
from orbit.store.creation import recover
from orbit.store.excerpt import from_command, key_line, run_excerpt
from orbit.store.groups import interrupted, interrupted_text
from orbit.store.lognote import log_note
from orbit.store.model import Run
from orbit.store.runs import Broken, RunStore

UNREADABLE = "unreadable"  # the state shown for a run whose files cannot be read
# The order of the counts in the progress line: what moves first, then how it ended.
PROGRESS_ORDER = (
    "running",
    "unknown",
    "starting",
    "queued",
    "succeeded",
    "failed",
    "cancelled",
    "lost",
    UNREADABLE,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "wait",
        help="wait for runs to finish",
        description="Wait for runs to finish; exit 1 if any did not succeed. With -g, the "
        "counts by state are shown on stderr while waiting.",
    )
    runs_or_group_arguments(p, "wait for every run of this group")
    p.add_argument(
        "--timeout",
        type=positive_float,
        metavar="S",
        help="stop waiting after S seconds (the runs go on); exit 124 if some have not finished",
    )
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    store = RunStore(env.home)
    check_runs_or_group(args)
    unreadable: list[Broken] = []
    more = None
    if args.group:
        ids, unreadable, more = _group(env, store, args.group)
    else:
        ids = [store.resolve(ref).id for ref in args.runs]
    progress = Progress(env.stderr, args.group) if args.group and not args.json else None
    # With -g the counts say how many wait; a line per queued run would drown them.
    queued = None if args.group else QueueNotes(env.stderr, clock=env.monotonic)
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    runs = [*wait_for(env, store, ids, progress, queued, more, deadline), *unreadable]
    results = [result(r) for r in runs]
    gone = interrupted(env.home, args.group) if args.group else []
    ok = not gone and all(r["state"] == "succeeded" for r in results)
    timed_out = any(isinstance(r, Run) and not r.state.finished for r in runs)
    if args.json:
        extra: dict[str, Any] = {"interrupted": gone} if args.group else {}
        if args.timeout is not None:
            extra["timed_out"] = timed_out
        print_json(env, {"ok": ok, "runs": results, **extra})
    else:
        print_results(env, results)
        if gone:
            print(f"orbit: {interrupted_text(args.group, gone)}", file=env.stderr)
    if timed_out:
        if not args.json:
            print(f"orbit: still waiting after {args.timeout:g} s; the runs go on", file=env.stderr)
        return int(ExitCode.TIMED_OUT)
    code = exit_code(results)
    return int(ExitCode.RUN_FAILED if gone and code is ExitCode.OK else code)


def _group(
    env: Env, store: RunStore, group: str
) -> tuple[list[str], list[Broken], Callable[[], list[str] | None] | None]:
    """The group's members (readable ids, unreadable runs), once the batches of submits
    killed meanwhile are finished or undone; and, while one of its batches is still being
    written, `more`: None until it is done, then the members again."""
    recover(env.home)
    writing = bool(pending(env.home, group))

    def members() -> tuple[list[str], list[Broken]]:
        # A run that cannot be read is never left out: when not even its run.yaml can be read,
        # its group is unknown and it counts for every group, so a group is never reported as
        # all succeeded over a member that failed and then became unreadable.
        try:
            return group_members(store, group, unknown_group_too=True)
        except NotFoundError:
            if writing or interrupted(env.home, group):
                return [], []  # said below, or its runs are on their way
            raise

    def more() -> list[str] | None:
        if pending(env.home, group):
            recover(env.home)  # its writer may have been killed since
            return None
        return members()[0]

    ids, unreadable = members()
    return ids, unreadable, more if writing else None


def exit_code(results: list[dict[str, Any]]) -> ExitCode:
    """0 when every run succeeded; 6 when one cannot be read (its result is unknown); else 1."""
    if any(r["state"] == UNREADABLE for r in results):
        return ExitCode.CORRUPT
    return ExitCode.OK if all(r["state"] == "succeeded" for r in results) else ExitCode.RUN_FAILED


def wait_for(
    env: Env,
    store: RunStore,
    ids: list[str],
    progress: Progress | None,
    queued: QueueNotes | None = None,
    more: Callable[[], list[str] | None] | None = None,
    deadline: float | None = None,
) -> list[Run | Broken]:
    """Block until every run is finished (a tick every few seconds repairs dead shepherds);
    with `queued`, say which runs wait in the queue and why; with `more`, also until it
    returns the ids to add (None: not yet); with `deadline` (time.monotonic), at most until
    then, returning the runs as they are.

    A run that cannot be read (or becomes unreadable) is not waited for: it is returned as
    Broken, and its result counts as unknown.
    """
    watches: list[StatusWatch | Broken] = [_watch(store, i) for i in dict.fromkeys(ids)]
    ticker = SideTicks(env)
    try:
        while True:
            watches = [w if isinstance(w, Broken) else _refresh(store, w) for w in watches]
            runs = [w if isinstance(w, Broken) else w.run for w in watches]
            if progress:
                progress.show(runs)
            if queued:
                for r in runs:
                    if not isinstance(r, Broken):
                        queued.show(r)
            if more is not None:
                extra = more()
                if extra is not None:
                    known = {w.id if isinstance(w, Broken) else w.run.id for w in watches}
                    watches += [_watch(store, i) for i in extra if i not in known]
                    more = None
                    continue
            elif all(isinstance(r, Broken) or r.state.finished for r in runs):
                return runs
            ticker.maybe()
            if deadline is not None and time.monotonic() >= deadline:
                return runs
            time.sleep(POLL_SECONDS * 4)
    finally:
        if progress:
            progress.close()


def _watch(store: RunStore, run_id: str) -> StatusWatch | Broken:
    try:
        return StatusWatch(store, store.load(run_id))
    except (CorruptError, NotFoundError) as exc:
        return store.broken(run_id, str(exc))


def _refresh(store: RunStore, watch: StatusWatch) -> StatusWatch | Broken:
    try:
        watch.refresh()
    except (CorruptError, NotFoundError) as exc:
        return store.broken(watch.run.id, str(exc))
    return watch


def result(run: Run | Broken) -> dict[str, Any]:
    if isinstance(run, Broken):
        return {
            "id": run.id,
            "name": run.name,
            "state": UNREADABLE,
            "reason": run.problem,
            "exit_code": None,
            "error_excerpt": None,
            "log_note": None,
        }
    return {
        "id": run.id,
        "name": run.name or None,
        "state": run.state.value,
        "reason": run.reason,
        "exit_code": run.exit_code,
        "error_excerpt": run_excerpt(run),
        "log_note": log_note(run.status),
    }


def result_line(label: str, state: str, reason: str | None, note: str | None) -> str:
    """`run 4 (b) failed: exit code 3; log incomplete: …`: a run's result in one line."""
    said = f": {reason}" if reason else ""
    return f"run {label} {state}{said}" + (f"; {note}" if note else "")


def print_results(env: Env, results: list[dict[str, Any]]) -> None:
    for r in results:
        label = f"{r['id']} ({r['name']})" if r.get("name") else r["id"]
        print(result_line(label, r["state"], r.get("reason"), r.get("log_note")), file=env.stdout)
        line = key_line(r.get("error_excerpt"))
        if line and from_command(r.get("reason")):
            print(f"  {line}", file=env.stdout)


def counts(label: str, runs: list[Run | Broken]) -> str:
    """`lr: 3 running, 5 queued, 2 succeeded, 1 failed` (states with no run are left out)."""
    by_state = Counter(UNREADABLE if isinstance(r, Broken) else r.state.value for r in runs)
    parts = [f"{by_state[s]} {s}" for s in PROGRESS_ORDER if by_state[s]]
    return f"{label}: {', '.join(parts)}"


class Progress:
    """The counts on stderr: rewritten in place on a terminal; elsewhere (a log, an agent's
    pipe) a new line only when they change and at most every LINE_SECONDS, so a sweep of short
    runs stays a few lines. The last counts are always printed by `close`."""

    LINE_SECONDS = 2.0

    def __init__(self, out: TextIO, label: str) -> None:
        self.out = out
        self.label = label
        self.tty = out.isatty()
        self.last: str | None = None  # the line shown last
        self.pending: str | None = None  # newer counts not shown yet (not a terminal)
        self.shown_at = float("-inf")

    def show(self, runs: list[Run | Broken]) -> None:
        line = counts(self.label, runs)
        if line == self.last:
            self.pending = None
            return
        if self.tty:
            self._write(f"\r{line}\x1b[K", line)
        elif time.monotonic() - self.shown_at >= self.LINE_SECONDS:
            self._write(f"{line}\n", line)
        else:
            self.pending = line

    def _write(self, text: str, line: str) -> None:
        self.out.write(text)
        self.out.flush()
        self.last, self.pending, self.shown_at = line, None, time.monotonic()

    def close(self) -> None:
        if self.pending is not None:
            self._write(f"{self.pending}\n", self.pending)  # the final counts, always
        elif self.tty and self.last is not None:
            self.out.write("\n")  # the summary (or an error) starts on a line of its own
            self.out.flush()
