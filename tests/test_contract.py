"""The `--json` contract: the exact keys agents may rely on. A change here must be deliberate
(and documented in docs/), never a side effect."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from conftest import Orbit

from orbit.cli import build_parser
from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore

RUN = {  # run --json, show --json
    "id",
    "name",
    "group",
    "folder",
    "tags",
    "params",
    "state",
    "reason",
    "exit_code",
    "error_excerpt",
    "oom_killed",
    "image",
    "command",
    "resources",
    "lease",
    "peaks",
    "timeout_min",
    "project",
    "datasets",
    "submitted_at",
    "started_at",
    "finished_at",
    "duration_s",
    "container",
    "metrics",
    "output",
    "dir",
    "notes",
    "group_notes",
}
ROW = {  # each of ps --json's runs
    "id",
    "name",
    "group",
    "folder",
    "tags",
    "params",
    "image",
    "command",
    "cpus",
    "mem_gb",
    "gpus",
    "state",
    "reason",
    "exit_code",
    "error_line",
    "log_note",
    "submitted_at",
    "started_at",
    "finished_at",
    "duration_s",
}
UNREADABLE_ROW = {"id", "state", "error"}
METRICS = {"latest", "lines", "x", "summary"}  # run --json, show --json: `metrics`
SUMMARY = {"latest", "min", "max", "count", "min_step", "max_step"}  # each of metrics.summary
COMPARE = {"columns", "same", "metrics", "metrics_left_out", "results", "x", "runs", "objective"}
NOTE = {"time", "author", "text"}
FAILURE = {  # each of failures --json's failures
    "signature",
    "count",
    "shared_params",
    "first_seen",
    "last_seen",
    "run_ids",
    "example_id",
    "reason",
    "excerpt",
    "cause",
    "outcome",
}
OUTCOME = {"status", "lines", "settings", "settings_total"}  # a failure's `outcome`
SETTING_OUTCOME = {"params", "status", "failed", "succeeded", "succeeded_total", "text"}
SUCCESS = {"run_ids", "changed", "compared_with", "same_seed", "peak_mem_bytes"}  # succeeded
CONFIG = {
    "home",
    "data_dir",
    "web_url",
    "default_image",
    "default_cpus",
    "default_mem_gb",
    "total_cpus",
    "total_mem_gb",
    "snapshot_max_mb",
    "pull_timeout_s",
    "count_outside_use",
    "outside_cpu_min",
    "outside_mem_min_gb",
    "reserve_after_s",
    "fake_gpus",
    "allowed_gpus",
    "gpu_outside_min_gb",
    "scheduler_interval_s",
    "node_unknown_after_s",
    "pids_limit",
    "docker_log_mb",
    "executor",
    "slurm_partition",
    "slurm_account",
    "slurm_extra_args",
}
RESOURCES = {
    "executor",
    "slurm_partition",
    "gpu_source",
    "gpus",
    "gpus_free",
    "nodes",
    "cpus",
    "memory",
    "leases",
    "queue",
    "problems",
}
GPU = {
    "index",
    "uuid",
    "name",
    "memory_total_gb",
    "memory_used_gb",
    "utilization",
    "allowed",
    "holder",
    "free",
    "processes",
}
PLUGIN_INSTALLED = {  # plugin install --json, each of plugin update --json's `updated`
    "agent",
    "skills_dir",
    "skills",
    "copied",
    "hooks",
    "hooks_changed",
    "mcp",
    "mcp_changed",
    "home",
}
PLUGIN_REMOVED = {"agent", "removed", "kept_changed", "hooks_removed", "mcp_removed"}
PLUGIN_ROW = {"agent", "installed", "skills_dir", "version", "stale", "hooks", "mcp"}
PLUGIN_MCP = {"config", "registered", "home", "stale"}  # a plugin list row's `mcp`
SMALL = ("--no-project", "--cpus", "0.5", "--mem", "0.25")


def keys(obj: Any) -> set[str]:
    assert isinstance(obj, dict), obj
    return set(obj)


def ok_json(orbit: Orbit, *args: str) -> Any:
    """`orbit ARGS --json`, the flag placed before `--` (config brings its own: it goes before
    config's action)."""
    if "--json" not in args:
        cut = args.index("--") if "--" in args else len(args)
        args = (*args[:cut], "--json", *args[cut:])
    res = orbit(*args)
    assert res.code == 0, res.err
    return res.json()


def test_json_of_a_finished_run(orbit: Orbit, busybox: str) -> None:
    ran = ok_json(
        orbit, "run", *SMALL, "--image", busybox, "-n", "c1", "-g", "g", "-w", "--", "echo", "hi"
    )
    assert keys(ran) == RUN
    assert ran["state"] == "succeeded" and ran["id"] == "1"
    assert keys(ran["resources"]) == {"cpus", "mem_gb", "gpus", "gpu_mem_gb", "gpu_ids"}
    assert keys(ran["lease"]) == {"cpus", "mem_gb", "gpus"}
    assert keys(ran["metrics"]) == METRICS
    assert ran["output"] == {"files": [], "count": 0}
    assert keys(ran["peaks"]) == {"mem_bytes", "cpu_cores", "cpu_seconds"}
    assert keys(ran["project"]) == {"mode"}

    listed = ok_json(orbit, "ps", "-a")
    assert keys(listed) == {"runs"}
    assert [keys(r) for r in listed["runs"]] == [ROW]
    assert ok_json(orbit, "ps") == {"runs": []}
    assert [keys(r) for r in ok_json(orbit, "ps", "-g", "g")["runs"]] == []  # active only

    shown = ok_json(orbit, "show", "c1")
    assert keys(shown) == RUN

    logs = ok_json(orbit, "logs", "1")
    assert keys(logs) == {"id", "state", "offset", "log"}
    assert logs["log"] == "hi\n"

    waited = ok_json(orbit, "wait", "-g", "g")
    assert keys(waited) == {"ok", "runs", "interrupted"}  # (with -g)
    assert [keys(r) for r in waited["runs"]] == [
        {"id", "name", "state", "reason", "exit_code", "error_excerpt", "log_note"}
    ]

    noted = ok_json(orbit, "note", "1", "lr too high")
    assert keys(noted) == {"id"} | NOTE
    assert [keys(n) for n in ok_json(orbit, "show", "1")["notes"]] == [NOTE]

    removed = ok_json(orbit, "rm", "--yes", "1")
    assert removed == {"removed": ["1"]}


def test_json_of_a_failed_run_and_failures(orbit: Orbit, busybox: str) -> None:
    res = orbit(
        "run", *SMALL, "--image", busybox, "-w", "--json", "--", "sh", "-c", "echo no >&2; exit 3"
    )
    failed = res.json()
    assert keys(failed) == RUN and failed["error_excerpt"] == "no"
    assert [keys(r) for r in ok_json(orbit, "ps", "-a")["runs"]] == [ROW]
    found = ok_json(orbit, "failures")
    assert keys(found) == {"failures"}
    assert [keys(f) for f in found["failures"]] == [FAILURE]
    assert found["failures"][0]["run_ids"] == [failed["id"]]
    assert keys(found["failures"][0]["outcome"]) == OUTCOME
    # A setting whose other seed succeeded: its outcome names the run that did.
    swept = orbit("sweep", *SMALL, "--image", busybox, "-g", "c", "-p", "seed=1,2", "-w", "--",
                  "sh", "-c", "echo seed {seed}; test {seed} = 2")  # fmt: skip
    assert swept.code == 1, swept.err
    [seeded] = ok_json(orbit, "failures", "-g", "c")["failures"]
    assert keys(seeded) == FAILURE and keys(seeded["outcome"]) == OUTCOME
    assert [keys(s) for s in seeded["outcome"]["settings"]] == [SETTING_OUTCOME]
    [success] = seeded["outcome"]["settings"][0]["succeeded"]
    assert keys(success) == SUCCESS and success["changed"] == {}


def test_json_of_metric_summaries_and_compare(orbit: Orbit, busybox: str) -> None:
    line = 'echo "{\\"step\\": $s, \\"loss\\": $((4 - s))}"'
    script = f"for s in 1 2 3; do {line}; done >> $ORBIT_METRICS"
    for name in ("m1", "m2"):
        ran = ok_json(orbit, "run", *SMALL, "--image", busybox, "-n", name, "-g", "m", "-w", "--",
                      "sh", "-c", script)  # fmt: skip
        assert ran["state"] == "succeeded", ran
    shown = ok_json(orbit, "show", "m1")
    assert keys(shown["metrics"]) == METRICS and shown["metrics"]["x"] == "step"
    assert {k: keys(v) for k, v in shown["metrics"]["summary"].items()} == {"loss": SUMMARY}
    assert shown["metrics"]["summary"]["loss"]["min_step"] == 3
    compared = ok_json(orbit, "compare", "-g", "m")
    assert keys(compared) == COMPARE
    assert [r["id"] for r in compared["runs"]] == ["1", "2"]
    assert [keys(c) for c in compared["columns"]] == [{"key", "title"}] * len(compared["columns"])
    assert compared["metrics"] == [{"name": "loss", "goal": "min", "why": "by its name"}]


def test_json_of_an_active_run_and_cancel(orbit: Orbit, busybox: str) -> None:
    submitted = ok_json(orbit, "run", *SMALL, "--image", busybox, "--", "sleep", "30")
    assert keys(submitted) == RUN
    active = ok_json(orbit, "ps")
    assert [keys(r) for r in active["runs"]] == [ROW]
    cancelled = ok_json(orbit, "cancel", submitted["id"])
    assert keys(cancelled) == {"runs"}
    assert [keys(r) for r in cancelled["runs"]] == [{"id", "state", "reason"}]
    assert cancelled["runs"][0]["state"] == "cancelled"


def test_json_of_an_unreadable_run(orbit: Orbit) -> None:
    store = RunStore(Home(orbit.home))
    run = store.create({"command": ["true"]}, state=RunState.QUEUED, reason="x", actor="test")
    run.path("status.yaml").write_text("state: [\n")
    for args in (("ps",), ("ps", "-a")):
        rows = ok_json(orbit, *args)["runs"]
        assert [keys(r) for r in rows] == [UNREADABLE_ROW]
        assert rows[0]["state"] == "unreadable"


def test_json_of_doctor_config_and_tick(orbit: Orbit, busybox: str) -> None:
    res = orbit("doctor", "--json")
    assert res.code in (0, 1), res.err  # 1: some check failed on this machine, still JSON
    doctor = res.json()
    assert keys(doctor) == {"ok", "checks"}
    assert doctor["checks"] and all(
        keys(c) == {"name", "status", "detail", "fix"} for c in doctor["checks"]
    )

    assert keys(ok_json(orbit, "config", "--json")) == CONFIG
    assert ok_json(orbit, "config", "--json", "set", "pull_timeout_s", "30") == {
        "key": "pull_timeout_s",
        "value": 30,
    }
    data = orbit.home.parent / "data"
    moved = ok_json(orbit, "config", "--json", "data", str(data))
    assert moved == {"data_dir": str(data), "moved": []}

    tick = ok_json(orbit, "scheduler", "tick")
    assert keys(tick) == {"ran", "admitted", "waiting", "repaired", "problems"}


def test_doctor_says_whether_an_image_is_local(orbit: Orbit, busybox: str) -> None:
    """The `image` check: the configured default image is local (OK), or not (WARN, with the
    pull and the recipe that needs no registry); none configured: the local images (OK)."""

    def image_check() -> dict[str, Any]:
        res = orbit("doctor", "--json")
        assert res.code in (0, 7), res.err
        (check,) = [c for c in res.json()["checks"] if c["name"] == "image"]
        assert keys(check) == {"name", "status", "detail", "fix"}
        return dict(check)

    check = image_check()
    assert check["status"] == "OK", check
    assert check["detail"].startswith("no default_image (runs need --image); local, newest first:")
    assert busybox in check["detail"] or check["detail"].endswith(" more"), check
    orbit.configure(default_image=busybox)
    assert image_check() == {
        "name": "image",
        "status": "OK",
        "detail": f"default image {busybox} is local",
        "fix": "",
    }
    orbit.configure(default_image="orbit-test/never-built:1")
    check = image_check()
    assert check["status"] == "WARN" and "orbit-test/never-built:1 is not local" in check["detail"]
    for part in ("debootstrap --variant=minbase --include=python3", "docker import -"):
        assert part in check["fix"]
    text = orbit("doctor").out
    (line,) = [x for x in text.splitlines() if x.split()[1:2] == ["image"]]
    assert line.startswith("WARN  image") and "  → `docker pull orbit-test/never-built:1`" in line


def test_every_command_has_json() -> None:
    """New commands get --json too (completion prints shell code; bench _drive is internal;
    hook prints what the agent's hook protocol asks for, JSON already; _node answers a primary
    in JSON or frames always; mcp speaks MCP, JSON-RPC, on stdout)."""
    exempt = {
        "orbit completion",
        "orbit hook",
        "orbit mcp",
        "orbit bench _drive",
        "orbit _node",
    }
    missing = []

    def walk(parser: argparse.ArgumentParser, inherited: bool) -> None:
        has_json = inherited or any("--json" in a.option_strings for a in parser._actions)
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for action in subs:
            for child in dict.fromkeys(action.choices.values()):
                walk(child, has_json)
        if not subs and not has_json and parser.prog not in exempt:
            missing.append(parser.prog)

    walk(build_parser(), False)
    assert missing == []


def test_json_of_resources(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    fake = tmp_path / "gpus.yaml"
    fake.write_text("gpus:\n  - {index: 0, memory_gb: 80}\n")
    orbit.environ["ORBIT_FAKE_GPUS"] = str(fake)
    orbit.configure(count_outside_use=False)
    run_id = orbit.submit("--image", busybox, *SMALL, "--gpus", "1", "--", "sleep", "30")
    orbit.wait_for(run_id, lambda s: s["state"] == "running")
    data = ok_json(orbit, "resources")
    assert keys(data) == RESOURCES
    assert [keys(g) for g in data["gpus"]] == [GPU]
    assert data["gpus"][0]["holder"] == f"leased to run {run_id}"
    cpus = {"total", "leased", "free", "measured", "outside", "outside_counted", "load"}
    assert keys(data["cpus"]) == cpus
    memory = {"total_gb", "leased_gb", "free_gb", "measured", "outside_gb", "outside_counted_gb"}
    assert keys(data["memory"]) == memory
    assert data["gpus_free"] == 0 and data["gpus"][0]["free"] is False
    assert [keys(lease) for lease in data["leases"]] == [
        {"id", "name", "state", "cpus", "mem_gb", "gpus", "user"}
    ]
    assert data["leases"][0]["gpus"] == [0]
    assert orbit("cancel", run_id).code == 0


def test_json_of_plugin(orbit: Orbit, tmp_path: Path) -> None:
    orbit.environ["HOME"] = str(tmp_path / "user")
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        orbit.environ.pop(var, None)
    assert keys(ok_json(orbit, "plugin", "install", "codex", "--json")) == PLUGIN_INSTALLED
    listed = ok_json(orbit, "plugin", "list", "--json")
    assert keys(listed) == {"package_version", "kit", "agents"}
    assert all(keys(row) == PLUGIN_ROW for row in listed["agents"])
    codex = next(row for row in listed["agents"] if row["agent"] == "codex")
    assert keys(codex["mcp"]) == PLUGIN_MCP
    updated = ok_json(orbit, "plugin", "update", "--json")["updated"]
    assert [keys(u) for u in updated] == [PLUGIN_INSTALLED]
    assert keys(ok_json(orbit, "plugin", "remove", "codex", "--json")) == PLUGIN_REMOVED
