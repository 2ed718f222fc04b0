"""The settings, resources and folders pages in a real headless Chromium (issue 24, part 6).

One home with: an auth profile and a notification profile (its test message really posted to a
local endpoint), a real node reached over a real sshd (tests/node_setup.py) with a run of this
home on it, a node that does not answer, and a real bench job (the toy benchmark of
test_bench_engine.py, solved and graded in Docker) filed in a folder. The server is started
with `orbit web`; the browser logs in with the printed URL and navigates from there.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from conftest import SMALL, Orbit, _cleanup_containers, gpu, stop_ticker, write_gpus
from docker_setup import BUSYBOX_IMAGE, PYTHON_IMAGE, REPO_ROOT
from node_setup import SshServer
from notify_server import Endpoint
from test_bench_engine import ADAPTER, kill_holder, remove_solved_images, toy_tasks
from test_bench_web import page  # noqa: F401  (a fixture: a logged-in Chromium page)
from test_web_e2e import NEEDS_CHROMIUM, _free_port
from test_web_e2e import _shot as shot

from orbit.agents import auth
from orbit.store import nodes
from orbit.store.home import Home

pytestmark = [NEEDS_CHROMIUM, pytest.mark.chromium]

API_KEY = "sk-ant-api03-THISISTHEWHOLESECRETKEY-a1b2"
HOOK_SECRET = "hook-signing-secret-0123456789"
TESTS = Path(__file__).resolve().parent
Shown = tuple[Any, list[str]]  # test_bench_web's `page`: the page and the errors it logged


@dataclass
class Site:
    orbit: Orbit
    base: str
    hook_url: str
    node_run: str  # a run of this home on node b
    tested_run: str  # the run the auth profile's last test names
    job: str  # a bench job filed under papers/bench


def _node(orbit: Orbit, root: Path, node_sshd: Callable[..., SshServer]) -> None:
    """Node b (a second home on this machine, reached over a real sshd) and node c (nothing
    answers at its port)."""
    node_home = root / "node-b"
    node_home.mkdir()
    (node_home / "config.yaml").write_text("format: 1\ncount_outside_use: false\n")
    gpus = write_gpus(root / "b-gpus.yaml", [gpu(0, uuid="GPU-b0"), gpu(1, uuid="GPU-b1")])
    sshd = node_sshd(
        {"ORBIT_NODE": "b", "ORBIT_FAKE_GPUS": str(gpus), "PYTHONPATH": str(REPO_ROOT)}
    )
    orbit.environ["ORBIT_NODE"] = "here"
    orbit.environ["ORBIT_SSH"] = sshd.orbit_ssh_env()
    py = f"{sys.executable} -m orbit"
    res = orbit("node", "add", "b", sshd.url(), "--home", str(node_home), "--orbit", py)
    assert res.code == 0, res.err
    down = nodes.parse_url("c", "ssh://root@127.0.0.1:1", orbit=py)
    nodes.add(Home(orbit.home, orbit.environ), down)


def _bench_job(orbit: Orbit, root: Path, image: str) -> str:
    bench_root = root / "toy"
    task = toy_tasks(image)["add"]
    (bench_root / "add").mkdir(parents=True)
    (bench_root / "add" / "task.json").write_text(json.dumps(task))
    orbit.environ["PYTHONPATH"] = f"{TESTS}:{REPO_ROOT}"
    assert orbit("bench", "add", "toy", str(bench_root), "--adapter", ADAPTER).code == 0
    res = orbit(
        "bench", "run", "toy", "-m", "oracle", "-n", "smoke", "--folder", "papers/bench",
        "-w", "--json",
    )  # fmt: skip
    assert res.code == 0, res.err
    return str(res.json()["job"]["id"])


def _profiles(orbit: Orbit, endpoint: Endpoint, tested_run: str) -> None:
    orbit.environ["MY_KEY"] = API_KEY
    orbit.environ["HOOK"] = endpoint.url
    orbit.environ["SIGN"] = HOOK_SECRET
    add = ("auth", "add", "cc", "--harness", "claude-code", "--kind", "api-key")
    assert orbit(*add, "--key-env", "MY_KEY").code == 0
    # What `orbit auth test cc` records once its run ended (the real command is tested with
    # the agent stand-ins in test_agent_runs.py).
    auth.record_test(
        Home(orbit.home, orbit.environ), "cc", ok=True, run=tested_run, state="succeeded"
    )
    add = ("notify", "add", "team", "--kind", "webhook", "--url-env", "HOOK")
    assert orbit(*add, "--secret-env", "SIGN", "--on", "failed,group").code == 0
    sent = orbit("notify", "test", "team")
    assert sent.code == 0, sent.err


@pytest.fixture(scope="module")
def site(
    docker_engine: None,
    node_sshd: Callable[..., SshServer],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("web-pages")
    (root / "work").mkdir()
    orbit = Orbit(root / "home", root / "work")
    endpoint = Endpoint()
    node_run = ""
    try:
        job = _bench_job(orbit, root, PYTHON_IMAGE)
        tested = str(orbit("bench", "show", job, "--json").json()["trials"][0]["runs"]["solve"])
        _profiles(orbit, endpoint, tested)
        assert orbit("mv", tested, "papers/bench").code == 0  # a run beside the job
        _node(orbit, root, node_sshd)
        node_run = orbit.submit(
            "--node", "b", *SMALL, "--image", BUSYBOX_IMAGE, "--", "sleep", "300"
        )
        orbit.wait_for(node_run, lambda s: bool((s.get("remote") or {}).get("id")), 90)
        res = orbit("web", "--port", str(_free_port()), "--json")
        assert res.code == 0, res.err
        url = urlsplit(str(res.json()["url"]))
        base = f"{url.scheme}://{url.netloc}"
        yield Site(orbit, base, endpoint.url, node_run, tested, job)
    finally:
        endpoint.close()
        orbit("web", "--stop")
        if node_run:
            orbit("cancel", node_run)
        for lock in (orbit.home / "bench" / "jobs").glob("*/driver.lock"):
            kill_holder(lock)
        stop_ticker(orbit.home)
        remove_solved_images(orbit)
        _cleanup_containers(orbit.home)


@pytest.fixture(scope="module")
def bench(site: Site) -> Site:
    """The home test_bench_web's `page` fixture (a logged-in Chromium page, from the URL
    `orbit web --json` prints) logs in to: this module's."""
    return site


def nav(shown: Shown, href: str) -> Any:
    """Follow the top bar's link to `href`; the page."""
    pg, _errors = shown
    pg.click(f"nav a[href='{href}']")
    pg.wait_for_url(f"**{href}")
    return pg


def test_settings_lists_the_profiles_and_never_a_secret(site: Site, page: Shown) -> None:  # noqa: F811
    pg, errors = nav(page, "/settings"), page[1]
    cc = pg.locator(".auth-profiles tr[data-profile=cc]").inner_text()
    assert "claude-code" in cc and "api-key" in cc
    assert f"…{API_KEY[-4:]} ({len(API_KEY)} characters)" in cc
    assert "ok" in pg.locator(".auth-profiles tr[data-profile=cc] .last-test").inner_text()
    link = pg.locator(".auth-profiles tr[data-profile=cc] .last-test a")
    assert link.get_attribute("href") == f"/runs/{site.tested_run}"
    team = pg.locator(".notify-profiles tr[data-profile=team]").inner_text()
    assert "webhook" in team and "failed, group" in team
    last = pg.locator(".notify-profiles tr[data-profile=team] .last-delivery").inner_text()
    assert "sent" in last and "Orbit test message for profile team" in last
    assert pg.locator(".notify-profiles tr[data-profile=team] .last-delivery time").count() == 1
    html = pg.content()
    hook_path = urlsplit(site.hook_url).path
    for secret in (API_KEY, API_KEY[:-4], HOOK_SECRET, site.hook_url, hook_path):
        assert secret not in html
    assert pg.locator("h2#doctor").is_visible() and "docker" in html
    shot(pg, "pages-settings")
    # The doctor's checks are reused for a while; "check again" runs them now.
    assert "checked " in pg.locator("h2#doctor").inner_text()
    pg.click("h2#doctor a")
    pg.wait_for_url("**/settings?recheck=1#doctor")
    assert "checked just now" in pg.locator("h2#doctor").inner_text()
    assert errors == []


def test_resources_show_the_nodes_and_their_runs(site: Site, page: Shown) -> None:  # noqa: F811
    pg, errors = nav(page, "/resources"), page[1]
    b = pg.locator("tr.node[data-node=b]")
    text = b.inner_text()
    assert "reachable" in text and "ago" in text and "/ 2" in text  # GPUs free of 2
    assert b.locator(f"a[href='/runs/{site.node_run}']").count() == 1
    # Node c answers nothing: the page did not wait for it; its probe tried meanwhile.
    deadline = time.monotonic() + 30
    while "unreachable" not in pg.locator("tr.node[data-node=c]").inner_text():
        assert time.monotonic() < deadline, pg.locator("tr.node[data-node=c]").inner_text()
        time.sleep(0.5)
        started = time.monotonic()
        pg.reload()
        assert time.monotonic() - started < 5
    assert "Connection refused" in pg.locator("tr.node[data-node=c]").inner_text()
    shot(pg, "pages-resources")
    assert errors == []


def test_the_folders_view_shows_the_job_in_its_folder(site: Site, page: Shown) -> None:  # noqa: F811
    pg, errors = nav(page, "/browse"), page[1]
    row = pg.locator("tr.folder[data-path=papers]")
    assert row.locator("td").nth(3).inner_text() == "1"  # one bench job under papers/
    row.locator("a").click()
    pg.wait_for_url("**/browse?folder=papers")
    pg.locator("tr.folder[data-path='papers/bench'] a").click()
    pg.wait_for_url("**/browse?folder=papers/bench")
    job = pg.locator(f"tr.job[data-id={site.job}]")
    assert "smoke" in job.inner_text() and "toy" in job.inner_text()
    assert pg.locator(f"tr.run[data-id='{site.tested_run}']").count() == 1
    shot(pg, "pages-folders")
    job.locator(f"a[href='/bench/jobs/{site.job}']").click()
    pg.wait_for_url(f"**/bench/jobs/{site.job}")
    # The jobs list names each job's folder, linked to it.
    pg.goto(site.base + "/bench")
    folder = pg.locator(f"tr.job[data-id={site.job}] td.folder a")
    assert folder.inner_text() == "papers/bench/"
    assert folder.get_attribute("href") == "/browse?folder=papers/bench"
    # Moved to the top level, it leaves the folder; papers/ holds the run only.
    assert site.orbit("mv", site.job, "/").code == 0
    pg.goto(site.base + "/browse")
    assert pg.locator(f"tr.job[data-id={site.job}]").count() == 1
    cells = pg.locator("tr.folder[data-path=papers] td").all_inner_texts()
    assert cells == ["papers/", "1", "0", "0"]
    assert errors == []
