"""`orbit notify add|list|test|rm|log` through the real entry point, against a real local HTTP
endpoint; secrets stay in notify.yaml (mode 0600) and out of every output and other file."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Orbit
from notify_server import DINGTALK_OK, Endpoint, endpoints

SECRET = "SECtopsecretsigningkey0123456789"


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    for made in endpoints([(200, b"ok")]):
        yield made[0]


def every_file(home: Path) -> Iterator[Path]:
    for root, _, files in os.walk(home):
        for name in files:
            yield Path(root) / name


def test_add_list_test_log_rm_and_no_secret_outside_notify_yaml(
    orbit: Orbit, endpoint: Endpoint
) -> None:
    orbit.environ["HOOK"] = endpoint.url
    orbit.environ["SIGN"] = SECRET
    add = orbit(
        "notify", "add", "team", "--kind", "webhook", "--url-env", "HOOK",
        "--secret-env", "SIGN", "--on", "succeeded,failed,group", "-g", "lr", "--metric", "loss",
        "--min",
    )  # fmt: skip
    assert add.code == 0, add.err
    assert "127.0.0.1" in add.out and "notify test team" in add.out
    path = orbit.home / "notify.yaml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "format: 1" in path.read_text() and SECRET in path.read_text()

    listed = orbit("notify", "list", "--json")
    assert listed.code == 0, listed.err
    (row,) = listed.json()
    assert row["name"] == "team" and row["kind"] == "webhook"
    assert row["on"] == ["succeeded", "failed", "group"] and row["groups"] == ["lr"]
    assert row["metric"] == "loss" and row["metric_direction"] == "min"
    assert row["url"].startswith("http://127.0.0.1:") and row["url"].endswith("…6789")
    assert row["secret"].startswith("…6789")
    text = orbit("notify", "list")
    assert "team" in text.out and "webhook" in text.out

    tested = orbit("notify", "test", "team")
    assert tested.code == 0, tested.err
    assert "ok" in tested.out and "HTTP 200" in tested.out
    (got,) = endpoint.received
    assert got.path == "/hook/abcdef0123456789"
    assert got.key.startswith("test-team-")
    assert got.headers["X-Orbit-Signature-256"].startswith("sha256=")
    assert got.json()["key"] == got.key

    log = orbit("notify", "log", "team", "--json")
    assert log.code == 0, log.err
    assert [r["outcome"] for r in log.json()] == ["sent"]
    assert "sent" in orbit("notify", "log").out

    outputs = [add, listed, text, tested, log]
    for res in outputs:
        assert endpoint.url not in res.out + res.err
        assert SECRET not in res.out + res.err
    for file in every_file(orbit.home):
        if file != path:
            data = file.read_bytes()
            assert SECRET.encode() not in data, file
            assert endpoint.url.encode() not in data, file
            assert b"abcdef0123456789" not in data, file

    rm = orbit("notify", "rm", "team")
    assert rm.code == 0 and "removed" in rm.out
    assert orbit("notify", "list", "--json").json() == []
    assert orbit("notify", "rm", "team").code == 3


def test_url_from_stdin_with_the_secret_on_the_next_line(orbit: Orbit) -> None:
    for made in endpoints([DINGTALK_OK]):
        (ding,) = made
        res = orbit(
            "notify", "add", "d", "--kind", "dingtalk", "--url-stdin", "--secret-stdin",
            "--on", "failed", stdin=f"{ding.url}?access_token=tok123456\n{SECRET}\n",
        )  # fmt: skip
        assert res.code == 0, res.err
        tested = orbit("notify", "test", "d", "--json")
        assert tested.code == 0, tested.err
        assert tested.json()["ok"] is True
        (got,) = ding.received
        # DingTalk is signed in the query: the secret itself never travels.
        assert "access_token=tok123456" in got.path and "sign=" in got.path
        assert SECRET not in got.path and SECRET.encode() not in got.body


def test_legacy_url_argument_works_but_warns(orbit: Orbit, endpoint: Endpoint) -> None:
    res = orbit("notify", "add", "x", "--kind", "slack", "--url", endpoint.url)
    assert res.code == 0, res.err
    assert "warning" in res.err and "--url-env" in res.err
    assert endpoint.url not in res.err + res.out


def test_a_failing_endpoint_is_reported_with_its_answer(orbit: Orbit) -> None:
    for made in endpoints([(403, b"bad token")]):
        orbit.environ["HOOK"] = made[0].url
        assert orbit("notify", "add", "x", "--kind", "slack", "--url-env", "HOOK").code == 0
        res = orbit("notify", "test", "x")
        assert res.code == 1
        assert "FAILED" in res.err and "HTTP 403" in res.err and "bad token" in res.err
    # Nothing listens on the port any more: refused, worth a retry.
    res = orbit("notify", "test", "x", "--json")
    assert res.code == 1
    assert res.json()["retry"] is True and "not reached" in res.json()["answer"]
    assert [r["outcome"] for r in orbit("notify", "log", "--json").json()] == ["failed"] * 2


@pytest.mark.parametrize(
    ("args", "environ", "message"),
    [
        (("--kind", "teams", "--url-env", "HOOK"), {"HOOK": "http://h/x"}, "invalid choice"),
        (("--kind", "slack", "--url-env", "NOPE"), {}, "--url-env NOPE: not set"),
        (("--kind", "slack", "--url-env", "HOOK"), {"HOOK": "ftp://h/x"}, "http(s) URL"),
        (("--kind", "slack", "--url-env", "HOOK"), {"HOOK": "not a url"}, "http(s) URL"),
        (
            (
                "--kind",
                "slack",
            ),
            {},
            "needs its URL: --url-env VAR or --url-stdin",
        ),
        (
            ("--kind", "slack", "--url-env", "HOOK", "--on", "failed,done"),
            {"HOOK": "http://h/x"},
            "--on takes succeeded, failed, group",
        ),
        (
            ("--kind", "slack", "--url-env", "HOOK", "--min"),
            {"HOOK": "http://h/x"},
            "--max and --min go with --metric NAME",
        ),
        (("--kind", "slack", "--url-stdin"), {}, "--url-stdin: nothing on stdin"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(
    orbit: Orbit, args: tuple[str, ...], environ: dict[str, str], message: str
) -> None:
    orbit.environ.update(environ)
    res = orbit("notify", "add", "p", *args)
    assert res.code == 2, res.err
    assert res.err.count("\n") == 1 and message in res.err, res.err
    assert "Traceback" not in res.err
    assert not (orbit.home / "notify.yaml").exists()


def test_names_duplicates_and_unknown_profiles(orbit: Orbit) -> None:
    orbit.environ["HOOK"] = "http://127.0.0.1:9/x"
    bad = orbit("notify", "add", "../x", "--kind", "slack", "--url-env", "HOOK")
    assert bad.code == 2 and "bad notify profile name" in bad.err
    own = orbit("notify", "add", "outbox", "--kind", "slack", "--url-env", "HOOK")
    assert (own.code, own.err) == (
        2,
        "orbit: bad notify profile name 'outbox': Orbit uses it itself; choose another\n",
    )
    assert orbit("notify", "add", "a", "--kind", "slack", "--url-env", "HOOK").code == 0
    again = orbit("notify", "add", "a", "--kind", "slack", "--url-env", "HOOK")
    assert again.code == 5 and "--replace" in again.err
    replaced = orbit("notify", "add", "a", "--kind", "wecom", "--url-env", "HOOK", "--replace")
    assert replaced.code == 0
    assert orbit("notify", "list", "--json").json()[0]["kind"] == "wecom"
    for action in ("test", "rm", "log"):
        res = orbit("notify", action, "zz")
        assert res.code == 3 and "no notify profile 'zz'" in res.err
    assert orbit("notify").code == 2
    (orbit.home / "notify.yaml").write_text("format: 1\nprofiles: [1\n")
    broken = orbit("notify", "list")
    assert broken.code == 6 and broken.err.count("\n") == 1
