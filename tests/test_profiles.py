"""The one store of named records (orbit/store/profiles.py) in its four uses, auth.json,
notify.yaml, nodes.yaml and datasets.yaml, and the one shape of their commands
(orbit/cli/profiles.py): the same words for the same refusals, the files as earlier Orbits
wrote them still read and written again byte for byte. No Docker, no node is reached."""

from __future__ import annotations

import argparse
import stat
from pathlib import Path
from typing import Any

import pytest
from conftest import Orbit

from orbit.agents import auth
from orbit.cli import build_parser
from orbit.errors import ConflictError, CorruptError, NotFoundError, UsageError
from orbit.notify import profiles as notify
from orbit.store import datasets, nodes
from orbit.store.home import Home
from orbit.store.profiles import ProfileStore

# Each kind: its module, a record named NAME, the file as main e5bb6e3 wrote it for two
# records (b, then a), and whether the file is private.
DATA = "/srv/corpus"
KINDS: dict[str, tuple[Any, Any, str, bool]] = {
    "auth": (
        auth,
        lambda name: auth.Profile(
            name=name, harness="codex", kind="api-key", key="k" * 20, source="stdin", created_at="T"
        ),
        '{\n  "version": 1,\n  "profiles": {\n'
        + ",\n".join(
            f'    "{n}": {{\n      "harness": "codex",\n      "kind": "api-key",\n'
            f'      "key": "{"k" * 20}",\n      "files": {{}},\n      "base_url": null,\n'
            '      "host_network": false,\n      "env": {},\n      "source": "stdin",\n'
            '      "created_at": "T"\n    }'
            for n in ("a", "b")
        )
        + "\n  }\n}\n",
        True,
    ),
    "notify": (
        notify,
        lambda name: notify.Profile(
            name=name, kind="slack", url="https://h.example/x", created_at="T"
        ),
        "format: 1\nprofiles:\n"
        + "".join(
            f"  {n}:\n    kind: slack\n    url: https://h.example/x\n    secret: null\n"
            '    "on":\n    - failed\n    - group\n    groups: []\n    metric: null\n'
            "    metric_direction: null\n    source: ''\n    created_at: T\n"
            for n in ("a", "b")
        ),
        True,
    ),
    "node": (
        nodes,
        lambda name: nodes.parse_url(name, "ssh://u@h:2222", added_at="T"),
        "format: 1\nnodes:\n"
        + "".join(
            f"  {n}:\n    url: ssh://u@h:2222\n    home: null\n    orbit: orbit\n    added_at: T\n"
            for n in ("b", "a")  # in the order they were added
        ),
        False,
    ),
    "data": (
        datasets,
        lambda name: datasets.Dataset(name=name, path=DATA, added_at="T", added_by="u"),
        "format: 1\ndatasets:\n"
        + "".join(
            f"  {n}:\n    path: {DATA}\n    added_at: T\n    added_by: u\n" for n in ("a", "b")
        ),
        False,
    ),
}


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def home_of(tmp_path: Path) -> Home:
    return Home(tmp_path / "home", {"ORBIT_NODE": "here", "USER": "u"})


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_reads_and_writes_its_file_as_before(tmp_path: Path, kind: str) -> None:
    module, make, old_file, private = KINDS[kind]
    store: ProfileStore[Any] = module.STORE
    home = home_of(tmp_path)
    for name in ("b", "a"):
        store.add(home, make(name))
    path = store.path(home)
    assert path.read_text() == old_file
    if private:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # The old file, as it was: read, and written back unchanged.
    path.write_text(old_file)
    loaded = store.load(home)
    assert sorted(loaded) == ["a", "b"] and loaded["a"] == make("a")
    store.remove(home, "a")  # the last one added
    store.add(home, make("a"))
    assert path.read_text() == old_file
    assert (home.locks_dir / f"{path.stem}.lock").exists()  # each change is made under it


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_same_refusals_in_the_same_words(tmp_path: Path, kind: str) -> None:
    module, make, _, _ = KINDS[kind]
    store: ProfileStore[Any] = module.STORE
    home = home_of(tmp_path)
    what, command = store.kind, store.command
    with pytest.raises(NotFoundError) as none:
        store.get(home, "x")
    assert str(none.value) == f"no {what} 'x' (none yet: add one with `{store.add_usage}`)"
    store.add(home, make("a"))
    with pytest.raises(ConflictError) as taken:
        store.add(home, make("a"))
    assert str(taken.value) == (
        f"{what} 'a' exists; `{command} rm a` first, or add it again with --replace"
    )
    store.add(home, make("a"), replace=True)
    store.add(home, make("b"))
    for action in (store.get, store.remove):
        with pytest.raises(NotFoundError) as unknown:
            action(home, "x")
        assert str(unknown.value) == f"no {what} 'x' (known: a, b)"
    with pytest.raises(UsageError) as bad:
        store.add(home, make("../a"))
    assert str(bad.value).startswith(f"bad {what} name '../a': letters, digits")
    assert sorted(store.load(home)) == ["a", "b"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_damaged_file_is_one_error_naming_it(tmp_path: Path, kind: str) -> None:
    module, _, old_file, _ = KINDS[kind]
    store: ProfileStore[Any] = module.STORE
    home = home_of(tmp_path)
    home.root.mkdir()
    path = store.path(home)
    key = store.version_key
    newer = old_file.replace(f'"{key}": 1', f'"{key}": 2').replace(f"{key}: 1", f"{key}: 2")
    wrong_name = old_file.replace("\n  a:", "\n  -a:").replace('"a": {', '"-a": {')
    for text, why in [
        (newer, f"{key} 2 is not one this Orbit reads (1)"),
        (wrong_name, f"{store.kind} '-a' has a name Orbit does not accept; fix or remove it"),
    ]:
        path.write_text(text)
        with pytest.raises(CorruptError) as err:
            store.load(home)
        assert str(err.value) == f"{path}: {why}"


def test_a_malformed_entry_says_which(tmp_path: Path) -> None:
    home = home_of(tmp_path)
    home.root.mkdir()
    nodes.registry_path(home).write_text("format: 1\nnodes:\n  a: {home: /x}\n  b: 3\n")
    with pytest.raises(CorruptError, match=r"nodes.yaml: node 'a' has no `url`; fix or remove"):
        nodes.load(home)
    nodes.registry_path(home).write_text("format: 1\nnodes:\n  a: {url: 'http://h'}\n")
    with pytest.raises(CorruptError, match=r"node 'a' is malformed \(node URL must start with"):
        nodes.load(home)
    (home.root / "auth.json").write_text('{"version": 1, "profiles": {"p": {"harness": "x"}}}')
    with pytest.raises(CorruptError, match=r"auth.json: auth profile 'p' is malformed; fix"):
        auth.load(home)


def test_a_node_is_refused_before_it_is_reached(tmp_path: Path) -> None:
    """`orbit node add` asks check_new before it reaches the node: this machine's own name
    never, a taken one only with --replace."""
    home = home_of(tmp_path)
    for refuse in (nodes.check_new, lambda h, n: nodes.add(h, nodes.parse_url(n, "ssh://h"))):
        with pytest.raises(ConflictError, match="'here' is this machine's own node name"):
            refuse(home, "here")
    assert not nodes.registry_path(home).exists()
    nodes.add(home, nodes.parse_url("b", "ssh://h"))
    with pytest.raises(ConflictError, match="`orbit node rm b` first, or add it again with"):
        nodes.check_new(home, "b")
    nodes.check_new(home, "b", replace=True)
    nodes.add(home, nodes.parse_url("b", "ssh://other:2222"), replace=True)
    assert nodes.get(home, "b").url == "ssh://other:2222"


# --- the commands ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("command", "what", "actions", "usage"),
    [
        ("auth", "auth profile", "add, ls, test or rm", "orbit auth add"),
        (
            "notify",
            "notify profile",
            "add, ls, test, rm, pair, unpair, install, uninstall or log",
            "orbit notify add",
        ),
        ("node", "node", "add, ls, test or rm", "orbit node add NAME ssh://[user@]host"),
        ("data", "dataset", "add, ls or rm", "orbit data add NAME PATH"),
    ],
)
def test_the_four_commands_have_one_shape(
    orbit: Orbit, command: str, what: str, actions: str, usage: str
) -> None:
    bare = orbit(command)
    assert (bare.code, bare.err) == (
        2,
        f"orbit: choose an action: {actions} (see `orbit {command} --help`)\n",
    )
    for ls in ("ls", "list"):
        res = orbit(command, ls, *(["--cached"] if command == "node" else []))
        assert (res.code, res.out) == (0, f"no {what}s; add one with `{usage}`\n"), res.err
    gone = orbit(command, "rm", "x")
    assert (gone.code, gone.err) == (
        3,
        f"orbit: no {what} 'x' (none yet: add one with `{usage}`)\n",
    )
    (add,) = [a for a in subparsers(build_parser())[command]._actions if a.dest == "action"]
    assert "--replace" in add.choices["add"]._option_string_actions


def test_rm_says_what_it_removed(orbit: Orbit) -> None:
    orbit.environ["HOOK"] = "http://127.0.0.1:9/x"
    assert orbit("notify", "add", "n", "--kind", "slack", "--url-env", "HOOK").code == 0
    assert orbit("notify", "rm", "n").out == "removed notify profile n\n"
    add = ("auth", "add", "p", "--harness", "codex", "--kind", "api-key", "--key-stdin")
    assert orbit(*add, stdin="k" * 20).code == 0
    assert orbit("auth", "rm", "p", "--json").json() == {"removed": "p"}
    empty = orbit(*add, stdin="  \n")
    assert (empty.code, empty.err) == (2, "orbit: --key-stdin: nothing on stdin\n")
