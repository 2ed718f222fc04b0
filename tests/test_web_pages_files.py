"""The settings, resources and folders pages against damaged and hostile files, through the
real WSGI app (the Chromium side is tests/test_web_pages.py): a page or a 4xx, never a 500,
every string escaped, no secret in the HTML."""

from __future__ import annotations

import json
import os
from pathlib import Path

from test_web_runs import TOKEN, Client

from orbit.agents import auth
from orbit.bench.model import Job, Method, job_dir, save_job
from orbit.notify import journal
from orbit.notify import profiles as notify
from orbit.store import nodes
from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore
from orbit.web.app import make_app

XSS = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"  # a folder name: no `/` in it
KEY = "sk-live-0123456789abcdefWHOLEKEY-z9y8"
HOOK = "https://hooks.example.com/services/T0/B0/WHOLEHOOKSECRET-q7"


def client(tmp_path: Path) -> tuple[Client, Home]:
    home = Home(tmp_path / "home", {**os.environ, "ORBIT_HOME": str(tmp_path / "home")})
    c = Client(make_app(home, token=TOKEN))
    c.login(home)
    return c, home


def text_of(c: Client, path: str, query: str = "") -> tuple[int, str]:
    r = c.get(path, query)
    return r.status, r.body.decode()


def test_settings_masks_every_secret_and_escapes_every_name(tmp_path: Path) -> None:
    c, home = client(tmp_path)
    profile = auth.Profile(name="cc", harness="claude-code", kind="relay", key=KEY)
    profile.base_url = f"https://gw.example/{XSS}"
    auth.add(home, profile)
    auth.record_test(home, "cc", ok=False, run=XSS, state="failed")
    notify.add(home, notify.Profile(name="team", kind="slack", url=HOOK, secret=KEY))
    journal.note(home, "team", "k", XSS, "given up", 5, f"HTTP 500 {XSS}")
    status, page = text_of(c, "/settings")
    assert status == 200
    for secret in (KEY, KEY[:-4], HOOK, "WHOLEHOOKSECRET", XSS):
        assert secret not in page
    assert "…z9y8" in page and "&lt;script&gt;" in page
    assert "given up" in page and "failed" in page


def test_damaged_profile_files_are_one_line_each(tmp_path: Path) -> None:
    c, home = client(tmp_path)
    (home.root / "auth.json").write_text('{"version": 1, "profiles": {"x": 5}}')
    (home.root / "notify.yaml").write_text("format: 1\nprofiles: [1, 2]\n")
    os.chmod(home.root / "auth.json", 0o600)
    status, page = text_of(c, "/settings")
    assert status == 200
    # One line in its section each, the home named (ORBIT_HOME), and the rest of the page.
    assert "ORBIT_HOME/auth.json: auth profile &#039;x&#039; is not a mapping" in page
    assert "ORBIT_HOME/notify.yaml: `profiles` is not a mapping" in page
    assert 'id="doctor"' in page
    # A profile with odd but loadable fields still gives the page.
    auth.STORE.path(home).write_text(
        json.dumps(
            {"version": 1, "profiles": {"cc": {"harness": "codex", "kind": "api-key",
                                              "key": KEY, "last_test": "yesterday",
                                              "created_at": 7}}}
        )
    )  # fmt: skip
    (home.root / "notify.yaml").write_text(
        "format: 1\nprofiles:\n  t: {kind: slack, url: 'https://h.example/x', 'on': failed, "
        "groups: 3}\n"
    )
    status, page = text_of(c, "/settings")
    assert status == 200 and "never" in page and KEY not in page


def test_resources_name_a_damaged_node_registry_and_a_hostile_reading(tmp_path: Path) -> None:
    c, home = client(tmp_path)
    nodes.add(home, nodes.parse_url("b", "ssh://root@127.0.0.1:1"))
    # What a node wrote about itself is escaped; a reading that is not a pool shows no figures.
    nodes.write_state(home, "b", info={"version": XSS, "pool": "x", "runs": {"queued": XSS}})
    status, page = text_of(c, "/resources")
    assert status == 200 and XSS not in page and "&lt;script&gt;" in page
    nodes.registry_path(home).write_text("format: 1\nnodes: [x]\n")
    status, page = text_of(c, "/resources")
    assert status == 200 and "`nodes` is not a mapping" in page


def test_the_folders_view_with_hostile_and_damaged_records(tmp_path: Path) -> None:
    c, home = client(tmp_path)
    store = RunStore(home)
    spec = {"name": XSS, "folder": f"p/{IMG}", "image": "i", "command": ["true"],
            "resources": {"cpus": 1.0, "mem_gb": 1.0, "gpus": 0}}  # fmt: skip
    store.create(spec, state=RunState.SUCCEEDED, reason="", actor="test")
    job = Job(id="j1", benchmark=XSS, name=XSS, tasks=["a"], methods=[Method("m", "oracle")])
    job.folder = "p"
    save_job(home, job)
    # A job.json whose folder is not text counts at the top level.
    (job_dir(home, "j2")).mkdir(parents=True)
    (job_dir(home, "j2") / "job.json").write_text(
        json.dumps({"id": "j2", "benchmark": "b", "name": None, "tasks": [], "methods": [],
                    "folder": {"a": 1}})
    )  # fmt: skip
    for query, want in (
        ("", 200),
        ("folder=p", 200),
        ("folder=p/%3Cimg%20src=x%20onerror=alert(1)%3E", 200),
        ("folder=nowhere", 404),
        ("folder=a/../b", 400),
        ("folder=%00", 400),
    ):
        status, page = text_of(c, "/browse", query)
        assert (query, status) == (query, want)
        assert XSS not in page and IMG not in page
    status, page = text_of(c, "/browse", "folder=p")
    assert 'href="/bench/jobs/j1"' in page and "&lt;script&gt;" in page
    assert 'href="/browse?folder=p/%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E"' in page
    status, page = text_of(c, "/browse")
    assert 'href="/bench/jobs/j2"' in page  # at the top level
