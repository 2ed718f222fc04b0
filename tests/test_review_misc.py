"""Issue 9's smaller items, on runs the tests make: `ps --state/--name/--sort` and params,
`resources` that says what it does not measure, the web API's JSON errors and `web --json`,
`config` in YAML, and the output/ files of `show --json`."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Orbit
from web_client import loopback

from orbit.errors import ExitCode
from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore

SMALL = ("--no-project", "--cpus", "0.25", "--mem", "0.25")

# Gradient descent on (w - 3)²: lr 0.05 and 0.2 converge (0.2 faster), lr 1.5 doubles the
# distance each step until the loss passes 1e5 and the script raises.
TRAIN = """
import json, os, sys
lr, seed = float(sys.argv[1]), int(sys.argv[2])
w = 0.7 * seed
metrics = open(os.environ['ORBIT_METRICS'], 'a')
for step in range(1, 21):
    w -= lr * 2 * (w - 3)
    loss = (w - 3) ** 2
    if loss > 1e5:
        raise FloatingPointError('loss diverged at step %d: %g' % (step, loss))
    metrics.write(json.dumps(dict(step=step, loss=loss)) + '\\n')
    metrics.flush()
"""


def ps_json(orbit: Orbit, *args: str) -> list[dict[str, Any]]:
    res = orbit("ps", "--json", *args)
    assert res.code == 0, res.err
    rows: list[dict[str, Any]] = res.json()["runs"]
    return rows


def last_loss(orbit: Orbit, run_id: str) -> float | None:
    lines = (orbit.run_dir(run_id) / "metrics.jsonl").read_text().splitlines()
    return json.loads(lines[-1])["loss"] if lines else None


# --- orbit ps --------------------------------------------------------------------------------
def test_ps_state_lists_exactly_the_failed_runs_of_a_sweep(orbit: Orbit, busybox: str) -> None:
    made = orbit(
        "sweep", *SMALL, "--image", busybox, "-g", "codes", "-n", "c{code}-r{rep}",
        "-p", "code=0,1,3", "-p", "rep=1,2", "--json", "--", "sh", "-c", "exit {code}",
    )  # fmt: skip
    assert made.code == 0, made.err
    runs = made.json()["runs"]
    assert orbit("wait", "-g", "codes").code == ExitCode.RUN_FAILED
    failed = [r["id"] for r in runs if r["params"]["code"] != "0"]
    succeeded = [r["id"] for r in runs if r["params"]["code"] == "0"]
    assert len(failed) == 4 and len(succeeded) == 2

    # --state implies -a; it may be repeated or a comma list; `finished` and `active` expand.
    assert [r["id"] for r in ps_json(orbit, "--state", "failed")] == failed
    assert [r["state"] for r in ps_json(orbit, "--state", "failed")] == ["failed"] * 4
    assert [r["id"] for r in ps_json(orbit, "--state", "succeeded")] == succeeded
    both = [r["id"] for r in ps_json(orbit, "--state", "succeeded", "--state", "lost,failed")]
    assert both == [r["id"] for r in runs]
    assert len(ps_json(orbit, "--state", "finished")) == 6
    assert ps_json(orbit, "--state", "active") == []
    text = orbit("ps", "--state", "failed", "-g", "codes")
    assert text.code == 0 and text.out.count("failed") == 4 and "succeeded" not in text.out
    assert orbit("ps", "--state", "queued").out == "no runs match\n"

    bad = orbit("ps", "--state", "broken")
    assert bad.code == ExitCode.USAGE and bad.out == ""
    assert bad.err.startswith("orbit: --state: unknown state 'broken'") and bad.err.count("\n") == 1

    # Params in the rows: an object in JSON, a PARAMS column in text; duration_s a number.
    row = ps_json(orbit, "--state", "failed")[0]
    assert row["params"] == {"code": "1", "rep": "1"}
    assert isinstance(row["duration_s"], float) and row["duration_s"] >= 0
    lines = orbit("ps", "-a").out.splitlines()
    assert "PARAMS" in lines[0].split()
    assert "code=3 rep=2" in lines[6]


def test_ps_sort_by_a_metric_and_by_fields(orbit: Orbit, busybox: str, python_image: str) -> None:
    made = orbit(
        "sweep", *SMALL, "--image", python_image, "-g", "fit", "-n", "lr{lr}-s{seed}",
        "-p", "lr=0.05,0.2,1.5", "-p", "seed=1,2", "--json", "--", "python3", "-c", TRAIN,
        "{lr}", "{seed}",
    )  # fmt: skip
    assert made.code == 0, made.err
    quiet = orbit.submit(*SMALL, "--image", busybox, "-g", "fit", "-n", "quiet", "--", "true")
    assert orbit("wait", "-g", "fit").code == ExitCode.RUN_FAILED
    ids = [r["id"] for r in made.json()["runs"]]
    by_name = {r["name"]: r["id"] for r in made.json()["runs"]}
    losses = {i: last_loss(orbit, i) for i in ids}
    assert all(v is not None for v in losses.values()) and last_loss(orbit, quiet) is None
    states = {r["id"]: r["state"] for r in ps_json(orbit, "-a")}
    assert [states[by_name[f"lr1.5-s{s}"]] for s in (1, 2)] == ["failed", "failed"]

    rising = ps_json(orbit, "-g", "fit", "-a", "--sort", "loss")
    order = [r["id"] for r in rising]
    assert order[-1] == quiet  # no loss at all: last
    assert order[:-1] == sorted(ids, key=lambda i: losses[i])
    assert {order[0], order[1]} == {by_name["lr0.2-s1"], by_name["lr0.2-s2"]}
    assert [r["metrics"] for r in rising][-1] == {"loss": None}
    assert rising[0]["metrics"] == {"loss": losses[order[0]]}
    for args in (("--sort=-loss",), ("--sort", "metric:loss", "--desc")):
        falling = [r["id"] for r in ps_json(orbit, "-a", *args)]
        assert falling == [*sorted(ids, key=lambda i: -(losses[i] or 0)), quiet], args

    text = orbit("ps", "-a", "--sort", "loss").out.splitlines()
    header = text[0].split()
    assert header[header.index("PARAMS") + 1] == "LOSS" and header[-1] == "REASON"
    assert text[-1].split()[:2] == [quiet, "quiet"] and text[-1].split()[-1] == "-"
    assert "lr=0.2 seed=" in text[1]

    # Fields, params and names.
    assert [r["name"] for r in ps_json(orbit, "-a", "--sort", "name")][:2] == [
        "lr0.05-s1",
        "lr0.05-s2",
    ]
    newest_first = sorted([*ids, quiet], key=int, reverse=True)
    assert [r["id"] for r in ps_json(orbit, "-a", "--sort=-id")] == newest_first
    assert [r["id"] for r in ps_json(orbit, "-a", "--desc")] == newest_first
    by_lr = [r["params"].get("lr") for r in ps_json(orbit, "-a", "--sort", "param:lr")]
    assert by_lr == ["0.05", "0.05", "0.2", "0.2", "1.5", "1.5", None]
    durations = [r["duration_s"] for r in ps_json(orbit, "-a", "--sort", "duration")]
    assert durations == sorted(durations)
    assert [r["name"] for r in ps_json(orbit, "-a", "--name", "LR0.2")] == ["lr0.2-s1", "lr0.2-s2"]
    globbed = ps_json(orbit, "-a", "--name", "lr*-s2", "--sort", "loss")
    assert [r["name"] for r in globbed] == ["lr0.2-s2", "lr0.05-s2", "lr1.5-s2"]
    assert [r["name"] for r in ps_json(orbit, "-a", "--state", "failed", "--name", "s1")] == [
        "lr1.5-s1"
    ]
    assert orbit("ps", "--name", "lr").out.startswith("no runs match")  # none active
    bad = orbit("ps", "-a", "--sort", "param:")
    assert bad.code == ExitCode.USAGE and bad.err.count("\n") == 1


def test_index_rows_of_an_older_orbit_are_rebuilt_with_params(orbit: Orbit) -> None:
    store = RunStore(Home(orbit.home))
    for seed in ("1", "2"):
        spec = {"name": f"s{seed}", "command": ["true"], "params": {"seed": seed}}
        store.create(spec, state=RunState.SUCCEEDED, reason="exit code 0", actor="test")
    index = orbit.home / "index.jsonl"
    old = [json.loads(line) for line in index.read_text().splitlines()]
    assert all("params" in row for row in old)
    for row in old:
        del row["params"]  # what an Orbit before the key wrote
    index.write_text("".join(json.dumps(row) + "\n" for row in old))
    assert [r["params"] for r in ps_json(orbit, "-a")] == [{"seed": "1"}, {"seed": "2"}]
    rows = [json.loads(line) for line in index.read_text().splitlines()]
    assert len(rows) == 4 and [r["params"] for r in rows[2:]] == [{"seed": "1"}, {"seed": "2"}]
    assert [r["params"] for r in ps_json(orbit, "-a")] == [{"seed": "1"}, {"seed": "2"}]
    assert len(index.read_text().splitlines()) == 4  # fresh now: nothing more appended


# --- orbit resources ---------------------------------------------------------------------------
def test_resources_say_what_they_do_not_measure(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    fake = tmp_path / "gpus.yaml"
    fake.write_text("gpus:\n  - {index: 0, memory_gb: 80}\n  - {index: 1, memory_gb: 80}\n")
    orbit.environ["ORBIT_FAKE_GPUS"] = str(fake)
    assert orbit.home.joinpath("config.yaml").read_text().count("count_outside_use: false")
    run_id = orbit.submit(
        "--image", busybox, "--no-project", "--cpus", "1", "--mem", "0.5", "--gpus", "1",
        "--", "sleep", "30",
    )  # fmt: skip
    orbit.wait_for(run_id, lambda s: s["state"] == "running")
    data = orbit("resources", "--json").json()
    cpus, memory = data["cpus"], data["memory"]
    assert cpus["measured"] is False and cpus["outside"] is None and cpus["load"] is None
    assert memory["measured"] is False and memory["outside_gb"] is None
    assert cpus["leased"] == 1 and cpus["free"] == round(cpus["total"] - 1, 2)
    assert memory["free_gb"] == round(memory["total_gb"] - 0.5, 2)
    assert data["gpus_free"] == 1
    assert [(g["index"], g["free"]) for g in data["gpus"]] == [(0, False), (1, True)]
    text = orbit("resources").out
    assert "0.0 busy outside" not in text and "in use outside" not in text
    assert f"1 of {cpus['total']:g} leased, {cpus['free']:g} free;" in text
    assert text.count("use outside Orbit not measured (count_outside_use: false)") == 2
    assert orbit("cancel", run_id).code == 0


def test_resources_measured_with_count_outside_use(tmp_path: Path) -> None:
    orbit = Orbit(tmp_path / "home", tmp_path)  # no runs: no tick takes a CPU sample meanwhile
    orbit.configure(count_outside_use=True)
    first = orbit("resources", "--json").json()
    assert first["memory"]["measured"] is True and isinstance(first["memory"]["outside_gb"], float)
    assert first["cpus"]["measured"] is False and first["cpus"]["load"] is None  # one sample
    assert "not measured yet" in orbit("resources").out
    time.sleep(0.5)
    second = orbit("resources", "--json").json()
    assert second["cpus"]["measured"] is True
    assert isinstance(second["cpus"]["load"], float) and second["cpus"]["load"] >= 0
    assert isinstance(second["cpus"]["outside"], float)
    free = second["cpus"]["total"] - second["cpus"]["leased"] - second["cpus"]["outside_counted"]
    assert second["cpus"]["free"] == round(max(0.0, free), 2)
    assert "busy outside Orbit (load " in orbit("resources").out


# --- the web: API errors in JSON, web --json --------------------------------------------------
class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def fetch(
    url: str, headers: dict[str, str] | None = None, data: bytes | None = None
) -> tuple[int, str, str, Any]:
    """(status, Content-Type, body, headers) of one request, errors included."""
    opener = urllib.request.build_opener(_NoRedirect)
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with opener.open(req, timeout=30) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode(), resp.headers
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode(), err.headers


@pytest.fixture
def served(orbit: Orbit) -> Any:
    res = orbit("web", "--json")
    assert res.code == 0, res.err
    try:
        yield res.json()
    finally:
        assert orbit("web", "--stop").code == 0


def test_web_json_and_api_errors_in_json(orbit: Orbit, busybox: str, served: Any) -> None:
    assert set(served) == {"url", "base_url", "token", "port", "pid", "started"}
    base, token = served["base_url"], served["token"]
    assert base == f"http://127.0.0.1:{served['port']}"
    url, host = loopback(served["url"])
    assert url.startswith(base + "/login?code=") and host["Host"].endswith(
        ".localhost:" + str(served["port"])
    )
    assert token == (orbit.home / "web-token").read_text().strip()
    run_id = orbit.submit(*SMALL, "--image", busybox, "-w", "--", "sh", "-c", "exit 0")
    auth = {"X-Orbit-Token": token}

    def api_error(path: str, status: int, **kw: Any) -> str:
        code, ctype, body, _ = fetch(base + path, **kw)
        assert code == status, (path, code, body)
        assert ctype == "application/json", (path, ctype)
        answer = json.loads(body)
        assert set(answer) == {"error", "status"} and answer["status"] == status
        assert str(orbit.home) not in answer["error"]
        return str(answer["error"])

    assert "not logged in" in api_error("/api/runs", 401)
    api_error("/api/runs", 401, headers={"X-Orbit-Token": "wrong"})
    api_error("/api/nothing/here", 404, headers=auth)
    assert "no run" in api_error("/api/runs/999/log", 404, headers=auth)
    api_error("/api/runs/../etc/metrics", 404, headers=auth)
    assert "integers" in api_error(f"/api/runs/{run_id}/log?offset=x", 400, headers=auth)
    many = ",".join(str(i) for i in range(1, 502))
    assert "at most 500" in api_error(f"/api/runs?ids={many}", 400, headers=auth)
    api_error("/api/runs", 405, headers=auth, data=b"x=1")

    # 403: a browser session without the form token, asking for JSON.
    code, _, _, headers = fetch(url, headers=host)
    assert code == 303
    cookie = headers["Set-Cookie"].split(";")[0]
    refused = api_error(
        "/cancel",
        403,
        headers={**host, "Cookie": cookie, "Accept": "application/json"},
        data=b"ids=1",
    )
    assert "form token" in refused

    # Pages keep their HTML error pages.
    code, ctype, body, _ = fetch(base + "/runs/999", headers=auth)
    assert code == 404 and ctype.startswith("text/html") and "<html" in body.lower()

    # /api/runs rows: typed as in ps --json.
    code, ctype, body, _ = fetch(base + "/api/runs", headers=auth)
    assert code == 200 and ctype == "application/json"
    row = json.loads(body)["runs"][run_id]
    assert row["state"] == "succeeded" and row["reason"] is None and row["error"] is None
    assert isinstance(row["duration_s"], float) and row["duration"].endswith("s")

    assert token not in (orbit.home / "runtime" / "web.log").read_text()


# --- config and show --json ------------------------------------------------------------------
def test_config_prints_yaml_that_reads_back(orbit: Orbit) -> None:
    res = orbit("config")
    assert res.code == 0, res.err
    assert "None" not in res.out and "False" not in res.out
    assert "count_outside_use: false\n" in res.out and "fake_gpus: null\n" in res.out
    assert yaml.safe_load(res.out) == orbit("config", "--json").json()
    assert orbit("config", "set", "allowed_gpus", "[0, 1]").out == "allowed_gpus: [0, 1]\n"
    assert orbit("config", "set", "count_outside_use", "true").out == "count_outside_use: true\n"
    assert orbit("config", "set", "fake_gpus", "null").out == "fake_gpus: null\n"
    assert yaml.safe_load(orbit("config").out) == orbit("config", "--json").json()


def test_show_json_lists_the_output_files(orbit: Orbit, busybox: str) -> None:
    script = (
        'cd "$ORBIT_OUTPUT" && mkdir ckpt && printf 12345 > result.json && '
        "for i in $(seq 1 150); do echo $i > f$i.txt; done"
    )
    run_id = orbit.submit(*SMALL, "--image", busybox, "-w", "--", "sh", "-c", script)
    shown = orbit("show", "--json", run_id).json()
    output = shown["output"]
    assert output["count"] == 152 and len(output["files"]) == 100
    assert output["files"][0] == {"name": "ckpt", "type": "dir", "size": None}
    assert {"name": "f1.txt", "type": "file", "size": 2} in output["files"]
    small = orbit.submit(*SMALL, "--image", busybox, "-w", "--", "sh", "-c", "true")
    assert orbit("show", "--json", small).json()["output"] == {"files": [], "count": 0}
    names = [f["name"] for f in output["files"]]
    assert names[1:] == sorted(names[1:]) and all(n.startswith("f") for n in names[1:])
    assert "result.json" not in names  # the 152nd entry: folders first, then by name
