"""orbit note ID… TEXT | -g GROUP TEXT: attach a conclusion to runs or, once, to a group.

The text is the last positional (or `--text`, after which every positional is a run). A last
positional that is a number or names a run is refused rather than taken as text: `orbit note
4 5` means two runs and a forgotten note more often than the note "5".
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from orbit.cli.common import add_json, group_members, group_option, print_json, runs_argument
from orbit.env import Env
from orbit.errors import ExitCode, NotFoundError, UsageError

_ID_LIKE = re.compile(r"^\d+$")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "note",
        help="attach a note to runs or to a group",
        description="orbit note ID… TEXT, orbit note -g GROUP TEXT, or --text TEXT with any "
        "number of ids. TEXT - reads the note from stdin.",
    )
    runs_argument(p, nargs="*", help="run ids, then the note (the last one)")
    group_option(p, "note the group once: shown on every member")
    p.add_argument("--text", help="the note (then every positional is a run id)")
    add_json(p)
    p.set_defaults(func=run)


def split(positionals: list[str], text: str | None, group: str | None) -> tuple[list[str], str]:
    """(run refs, text) from the command line, or a UsageError naming the fix."""
    refs = list(positionals)
    if text is None:
        if not refs:
            raise UsageError("give the note: orbit note ID… TEXT or orbit note -g GROUP TEXT")
        text = refs.pop()
        if not refs and not group:
            raise UsageError(f"give run ids and the note: orbit note ID… TEXT (got only {text!r})")
    if group and refs:
        raise UsageError("give run ids or -g GROUP, not both (quote the note if it has spaces)")
    if not group and not refs:
        raise UsageError("give run ids or -g GROUP")
    return refs, text


def _refuse_id_like(store: Any, refs: list[str], text: str, from_flag: bool) -> None:
    """`orbit note 4 5`: is 5 the note? Never guess."""
    if from_flag or not refs:
        return
    if _ID_LIKE.match(text):
        names_run = True
    elif any(c.isspace() for c in text):
        return  # a sentence: no run is named like that
    else:
        try:
            store.resolve_id(text)
            names_run = True
        except NotFoundError:
            names_run = False
    if names_run:
        every = " ".join([*refs, text])
        raise UsageError(
            f"is {text!r} a run or the note? Give the note with --text: "
            f"orbit note {every} --text 'NOTE'"
        )


def run(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.notes import add_group_note, author
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    refs, text = split(args.runs, args.text, args.group)
    _refuse_id_like(store, refs, text, args.text is not None)
    runs = [store.resolve(ref) for ref in dict.fromkeys(refs)]  # all found before any write
    if args.group:
        group_members(store, args.group, unknown_group_too=False)  # NotFoundError if none
    text = (env.stdin.read() if text == "-" else text).strip()
    if not text:
        raise UsageError("the note is empty")
    by = author(env.environ)
    if args.group:
        note = add_group_note(env.home, args.group, text, by)
        if args.json:
            print_json(env, note)
        else:
            print(f"noted on group {args.group} (shown on each of its runs)", file=env.stdout)
        return ExitCode.OK
    notes = [store.add_note(r.id, text, by) for r in runs]
    if args.json:
        if len(runs) == 1:
            print_json(env, {"id": runs[0].id, **notes[0]})
        else:
            print_json(env, {"ids": [r.id for r in runs], **notes[0]})
    else:
        print(
            f"noted on run{'s' if len(runs) > 1 else ''} {', '.join(r.label for r in runs)}",
            file=env.stdout,
        )
    return ExitCode.OK
