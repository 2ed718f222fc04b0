"""`orbit note`: several runs at once, a group conclusion stored once and shown on every
member, ambiguous commands refused (never an id taken as the text), and who a note is by."""

from __future__ import annotations

import json
import os
import pwd

import pytest
from conftest import SMALL, Orbit

from orbit.errors import ExitCode
from orbit.store.home import Home
from orbit.store.notes import author, group_dir


def _runs(orbit: Orbit, image: str, group: str, n: int) -> list[str]:
    argv = ("-w", "-g", group, "--image", image, *SMALL, "--", "true")
    return [orbit.submit(*argv) for _ in range(n)]


def test_several_runs_and_the_group(orbit: Orbit, busybox: str) -> None:
    a, b, c = _runs(orbit, busybox, "g", 3)
    other = _runs(orbit, busybox, "h", 1)[0]
    orbit.environ["ORBIT_AUTHOR"] = "ada"

    res = orbit("note", a, b, "lr too high for both")
    assert res.code == 0, res.err
    assert res.out == f"noted on runs {a}, {b}\n"
    for run_id in (a, b):
        notes = orbit("show", "--json", run_id).json()["notes"]
        assert [(n["text"], n["author"]) for n in notes] == [("lr too high for both", "ada")]
    assert orbit("show", "--json", c).json()["notes"] == []

    many = orbit("note", "--json", "--text", "7", a, c).json()  # --text: every positional a run
    assert many["ids"] == [a, c] and many["text"] == "7"

    group = orbit("note", "-g", "g", "--json", "lr=1 is best; lr=50 diverges")
    assert group.code == 0, group.err
    assert group.json()["group"] == "g"
    stored = group_dir(Home(orbit.home), "g") / "notes.jsonl"
    assert len(stored.read_text().splitlines()) == 1  # once, not once per run
    for run_id in (a, b, c):
        shown = orbit("show", "--json", run_id).json()
        assert [n["text"] for n in shown["group_notes"]] == ["lr=1 is best; lr=50 diverges"]
        text = orbit("show", run_id).out
        assert "group note" in text and "lr=1 is best; lr=50 diverges (ada)" in text
    assert orbit("show", "--json", other).json()["group_notes"] == []

    piped = orbit("note", "-g", "g", "-", stdin="from stdin\n")
    assert piped.code == 0
    last = stored.read_text().splitlines()[-1]
    assert json.loads(last)["text"] == "from stdin"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["note", "{a}", "{b}"], "is '{b}' a run or the note? Give the note with --text"),
        (["note", "{a}", "5"], "is '5' a run or the note?"),
        (["note", "{a}", "named"], "is 'named' a run or the note?"),
        (["note", "{a}"], "give run ids and the note"),
        (["note"], "give the note"),
        (["note", "-g", "g", "{a}", "text"], "give run ids or -g GROUP, not both"),
        (["note", "{a}", "   "], "the note is empty"),
    ],
)
def test_ambiguous_or_empty_is_refused(
    orbit: Orbit, busybox: str, argv: list[str], message: str
) -> None:
    a, b = _runs(orbit, busybox, "g", 2)
    orbit.submit("-w", "-n", "named", "--image", busybox, *SMALL, "--", "true")
    res = orbit(*[x.format(a=a, b=b) for x in argv])
    assert res.code == ExitCode.USAGE, res.err
    assert len(res.err.splitlines()) == 1 and message.format(b=b) in res.err
    for run_id in (a, b):
        assert orbit.run_dir(run_id).joinpath("notes.jsonl").read_text() == ""


def test_unknown_refs_write_nothing(orbit: Orbit, busybox: str) -> None:
    (a,) = _runs(orbit, busybox, "g", 1)
    res = orbit("note", a, "999", "--text", "x")
    assert res.code == ExitCode.NOT_FOUND and "999" in res.err
    assert orbit.run_dir(a).joinpath("notes.jsonl").read_text() == ""  # all found before a write
    res = orbit("note", "-g", "nope", "x")
    assert res.code == ExitCode.NOT_FOUND and "no runs in group 'nope'" in res.err
    assert not group_dir(Home(orbit.home), "nope").exists()


def test_author_chain() -> None:
    assert author({"ORBIT_AUTHOR": "ada", "USER": "bob"}) == "ada"
    assert author({"USER": "bob", "CLAUDECODE": "1"}) == "bob"
    assert author({"LOGNAME": "carl"}) == "carl"
    # An agent's shell often has no $USER: the agent names itself.
    assert author({"CLAUDECODE": "1"}) == "claude-code"
    assert author({"CODEX_SANDBOX": "seatbelt"}) == "codex"
    assert author({"CODEX_THREAD_ID": "0199"}) == "codex"
    # Nothing set: the login name of this uid, never "unknown".
    assert author({}) == pwd.getpwuid(os.getuid()).pw_name


def test_note_author_in_an_agent_shell(orbit: Orbit, busybox: str) -> None:
    (a,) = _runs(orbit, busybox, "g", 1)
    for key in ("USER", "LOGNAME", "ORBIT_AUTHOR"):
        orbit.environ.pop(key, None)
    orbit.environ["CLAUDECODE"] = "1"
    assert orbit("note", "--json", a, "from the agent").json()["author"] == "claude-code"
