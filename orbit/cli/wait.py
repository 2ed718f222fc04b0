"""orbit wait ID… | -g GROUP: block until the runs finish; exit 1 if any did not succeed."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, TextIO

from orbit.cli.common import add_json, group_option, print_json, runs_argument
from orbit.cli.watch import POLL_SECONDS, StatusWatch, Ticker
from orbit.env import Env
from orbit.errors import ExitCode, NotFoundError, UsageError

if TYPE_CHECKING:
    from orbit.store.model import Run
    from orbit.store.runs import RunStore

# The order of the counts in the progress line: what moves first, then how it ended.
PROGRESS_ORDER = ("running", "starting", "queued", "succeeded", "failed", "cancelled", "lost")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "wait",
        help="wait for runs to finish",
        description="Wait for runs to finish; exit 1 if any did not succeed. With -g, the "
        "counts by state are shown on stderr while waiting.",
    )
    runs_argument(p, nargs="*")
    group_option(p, "wait for every run of this group")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    if bool(args.runs) == bool(args.group):
        raise UsageError("give run ids or -g GROUP")
    if args.group:
        ids = group_ids(store, args.group)
    else:
        ids = [store.resolve(ref).id for ref in args.runs]
    progress = Progress(env.stderr, args.group) if args.group and not args.json else None
    runs = wait_for(env, store, ids, progress)
    results = [result(r) for r in runs]
    ok = all(r["state"] == "succeeded" for r in results)
    if args.json:
        print_json(env, {"ok": ok, "runs": results})
    else:
        print_results(env, results)
    return int(ExitCode.OK if ok else ExitCode.RUN_FAILED)


def group_ids(store: RunStore, group: str) -> list[str]:
    ids = [r["id"] for r in store.list_rows() if isinstance(r, dict) and r.get("group") == group]
    if not ids:
        raise NotFoundError(f"no runs in group {group!r}")
    return ids


def wait_for(env: Env, store: RunStore, ids: list[str], progress: Progress | None) -> list[Run]:
    """Block until every run is finished (a tick every few seconds repairs dead shepherds)."""
    watches = [StatusWatch(store, store.load(i)) for i in dict.fromkeys(ids)]
    ticker = Ticker(env)
    try:
        while True:
            runs = [w.refresh() for w in watches]
            if progress:
                progress.show(runs)
            if all(r.state.finished for r in runs):
                return runs
            ticker.maybe()
            time.sleep(POLL_SECONDS * 4)
    finally:
        if progress:
            progress.close()


def result(run: Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "name": run.name or None,
        "state": run.state.value,
        "reason": run.status.get("reason"),
        "exit_code": run.status.get("exit_code"),
    }


def print_results(env: Env, results: list[dict[str, Any]]) -> None:
    for r in results:
        reason = f": {r['reason']}" if r.get("reason") else ""
        label = f"{r['id']} ({r['name']})" if r.get("name") else r["id"]
        print(f"run {label} {r['state']}{reason}", file=env.stdout)


def counts(label: str, runs: list[Run]) -> str:
    """`lr: 3 running, 5 queued, 2 succeeded, 1 failed` (states with no run are left out)."""
    by_state = Counter(r.state.value for r in runs)
    parts = [f"{by_state[s]} {s}" for s in PROGRESS_ORDER if by_state[s]]
    return f"{label}: {', '.join(parts)}"


class Progress:
    """The counts on stderr: rewritten in place on a terminal; elsewhere (a log, an agent's
    pipe) a new line only when they change, so the output stays short."""

    def __init__(self, out: TextIO, label: str) -> None:
        self.out = out
        self.label = label
        self.tty = out.isatty()
        self.last: str | None = None

    def show(self, runs: list[Run]) -> None:
        line = counts(self.label, runs)
        if line == self.last:
            return
        self.last = line
        self.out.write(f"\r{line}\x1b[K" if self.tty else f"{line}\n")
        self.out.flush()

    def close(self) -> None:
        if self.tty and self.last is not None:
            self.out.write("\n")  # the summary (or an error) starts on a line of its own
            self.out.flush()
