"""Data directory, settings, tab completion and the container's Docker-side settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ORBIT_PY, SMALL, Orbit

from orbit.errors import ExitCode


def test_data_directory_holds_the_runs(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    data = tmp_path / "big-disk"
    res = orbit("config", "data", str(data))
    assert res.code == 0, res.err
    run_id = orbit.submit(
        "--image",
        busybox,
        *SMALL,
        "--",
        "sh",
        "-c",
        'echo kept > "$ORBIT_OUTPUT/o.txt"',
    )
    assert orbit("wait", run_id).code == 0
    assert (data / "runs" / run_id / "output" / "o.txt").read_text() == "kept\n"
    assert not (orbit.home / "runs" / run_id).exists()
    assert orbit("config", "--json").json()["data_dir"] == str(data)
    # Moving again needs --move, and then takes the finished runs along.
    other = tmp_path / "other-disk"
    refused = orbit("config", "data", str(other))
    assert refused.code == ExitCode.USAGE and "--move" in refused.err
    assert orbit("config", "data", str(other), "--move").code == 0
    assert (other / "runs" / run_id / "output" / "o.txt").exists()
    assert orbit("show", run_id, "--json").json()["state"] == "succeeded"


def test_orbit_data_environment_overrides(orbit: Orbit, busybox: str, tmp_path: Path) -> None:
    orbit.environ["ORBIT_DATA"] = str(tmp_path / "via-env")
    run_id = orbit.submit(
        "--image", busybox, "--no-project", "--cpus", "1", "--mem", "0.25", "--", "true"
    )
    assert (tmp_path / "via-env" / "runs" / run_id / "run.yaml").exists()
    assert orbit("wait", run_id).code == 0


def test_config_set_rejects_unknown_keys_and_bad_yaml(orbit: Orbit) -> None:
    assert orbit("config", "set", "default_cpus", "2").code == 0
    assert orbit("config", "--json").json()["default_cpus"] == 2
    bad = orbit("config", "set", "nonsense", "1")
    assert bad.code == ExitCode.USAGE and len(bad.err.strip().splitlines()) == 1
    (orbit.home / "config.yaml").write_text("format: 1\ndefault_cpus: [unclosed\n")
    broken = orbit("config")
    assert broken.code == ExitCode.CORRUPT
    assert "config.yaml" in broken.err and len(broken.err.strip().splitlines()) == 1


def _complete(orbit: Orbit, line: str, tmp_path: Path) -> list[str]:
    out = tmp_path / "completions"
    env = {
        **orbit.environ,
        "_ARGCOMPLETE": "1",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
        "_ARGCOMPLETE_IFS": "\n",
    }
    subprocess.run([sys.executable, ORBIT_PY], env=env, capture_output=True, timeout=60)
    return [w.strip() for w in out.read_text().split("\n")] if out.exists() else []


def test_tab_completion_offers_commands_ids_names_and_groups(
    orbit: Orbit, busybox: str, tmp_path: Path
) -> None:
    for name, group in (("alpha", "g-one"), ("beta", "g-two")):
        orbit(
            "run",
            "--image",
            busybox,
            *SMALL,
            "-n",
            name,
            "-g",
            group,
            "-w",
            "--",
            "true",
        )
    assert "show" in _complete(orbit, "orbit sh", tmp_path)
    assert set(_complete(orbit, "orbit show ", tmp_path)) >= {"1", "2", "alpha", "beta"}
    assert _complete(orbit, "orbit logs al", tmp_path) == ["alpha"]
    assert _complete(orbit, "orbit wait -g g-t", tmp_path) == ["g-two"]


def test_completion_offers_the_settings_and_their_values(orbit: Orbit, tmp_path: Path) -> None:
    # From the settings' schema (orbit/store/settings.py); not the options (-h, --help).
    def words(line: str) -> list[str]:
        return [w for w in _complete(orbit, line, tmp_path) if not w.startswith("-")]

    slurm = ["slurm_account", "slurm_extra_args", "slurm_partition"]
    assert words("orbit config set slurm_") == slurm
    assert words("orbit config set executor ") == ["local", "slurm", "null"]
    assert words("orbit config set count_outside_use f") == ["false"]
    assert words("orbit config set default_cpus ") == ["null"]


def test_container_is_named_labelled_capped_and_reaped(orbit: Orbit, busybox: str) -> None:
    run_id = orbit.submit(
        "--image", busybox, "--no-project", "--cpus", "0.5", "--mem", "0.25", "--", "sleep", "30"
    )
    status = orbit.wait_for(run_id, lambda s: s["state"] == "running")
    info = json.loads(
        subprocess.run(
            ["docker", "inspect", status["container"]], capture_output=True, text=True, check=True
        ).stdout
    )[0]
    from orbit.store.home import Home

    tag = Home(orbit.home.resolve()).tag
    assert info["Name"] == f"/orbit-{tag}-{run_id}"
    labels = info["Config"]["Labels"]
    assert labels["orbit.run"] == run_id and labels["orbit.home"] == str(orbit.home.resolve())
    host = info["HostConfig"]
    assert host["LogConfig"] == {
        "Type": "json-file",
        "Config": {"max-file": "3", "max-size": "50m"},  # docker_log_mb: 150
    }
    assert host["Init"] is True
    assert host["NanoCpus"] == 500_000_000 and host["Memory"] == 256 * 1024**2
    assert host["MemorySwap"] == host["Memory"]
    assert info["Config"]["User"] == f"{os.getuid()}:{os.getgid()}"
    assert orbit("cancel", run_id).code == 0


def test_doctor_reports_each_check(orbit: Orbit, docker_engine: None) -> None:
    res = orbit("doctor", "--json")
    checks = {c["name"]: c for c in res.json()["checks"]}
    assert checks["docker"]["status"] == "OK"
    assert checks["gpus"]["status"] in ("OK", "WARN")
    assert {"data directory", "docker data root", "python", "packages"} <= set(checks)
    text = orbit("doctor")
    assert any(line.startswith("OK") and "docker" in line for line in text.out.splitlines())
