"""The Harbor adapter on real Harbor-format tasks (tests/bench_tasks/) and on hand-made bad ones:
what it lists and why a task is unsupported, the solve and verify runs it asks for, how it reads
a reward. The phases are run for real as Orbit runs (a submit like the bench engine's), so the
fixtures' BuildKit Dockerfiles, mounts, users and scripts are proven on the Docker engine.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from bench_setup import BASIC, UNSUPPORTED, ensure_debian_image
from conftest import Orbit

from orbit.bench.harbor import HarborAdapter, instruction_text, score_rewards
from orbit.bench.harbor_toml import TaskTomlError, parse_config, size_to_mb
from orbit.bench.model import Benchmark, Method, Phase, Task
from orbit.errors import UsageError
from orbit.store.home import Home

ORACLE = Method("oracle", "oracle")
EMPTY = Method("empty", "empty")
CODEX = Method("cx", "codex", auth="p")


def adapter(folder: Path, home: Path, environ: dict[str, str] | None = None) -> HarborAdapter:
    env = {"PATH": os.environ["PATH"], **(environ or {})}
    return HarborAdapter(Benchmark(folder.name, str(folder), "harbor"), Home(home, env))


def listed(folder: Path, home: Path, **kw: Any) -> dict[str, Task]:
    return {t.name: t for t in adapter(folder, home, **kw).tasks()}


def write_task(root: Path, name: str, toml: str, *, files: dict[str, str] | None = None) -> Path:
    task = root / name
    base = {
        "instruction.md": "Do it.\n",
        "environment/Dockerfile": "FROM debian:bookworm-slim\n",
        "solution/solve.sh": "true\n",
        "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
    }
    for rel, text in {**base, **(files or {})}.items():
        path = task / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (task / "task.toml").write_text(textwrap.dedent(toml))
    return task


# --- listing and support ----------------------------------------------------------------------
def test_fixture_tasks_are_listed_with_their_resources(tmp_path: Path) -> None:
    tasks = listed(BASIC, tmp_path)
    assert sorted(tasks) == [
        "as-user",
        "multi-score",
        "no-reward",
        "oom",
        "orbit-test/hello",  # [task].name, not the folder's
        "planted",
        "separate",
        "slow",
    ]
    assert all(t.supported and t.reason is None for t in tasks.values())
    hello = tasks["orbit-test/hello"]
    assert (hello.cpus, hello.mem_gb, hello.gpus, hello.timeout_min) == (1.0, 0.25, 0, 2.0)
    assert tasks["oom"].mem_gb == 64 / 1024
    assert tasks["slow"].timeout_min == pytest.approx(0.1)
    # Unset in the toml: None, for the engine to apply Orbit's defaults.
    assert (tasks["planted"].cpus, tasks["planted"].mem_gb, tasks["planted"].timeout_min) == (
        None,
        None,
        None,
    )
    assert tasks["multi-score"].mem_gb == 0.25  # legacy memory = "256M"
    assert tasks["multi-score"].data["schema_version"] == "1.0"  # legacy top-level version
    assert tasks["separate"].data["mode"] == "separate"


def test_unsupported_tasks_say_why(tmp_path: Path) -> None:
    tasks = listed(UNSUPPORTED, tmp_path)
    reasons = {name: (t.supported, t.reason) for name, t in tasks.items()}
    assert reasons == {
        "allowlist": (False, "allowlist networking not supported"),
        "compose": (False, "docker-compose sidecars not supported"),
        "multi-step": (False, "multi-step tasks (steps) not supported"),
        "two-gpus": (False, "needs 2 GPUs (H100), this machine has 0"),
        "windows": (False, "needs Windows"),
    }


def test_gpus_are_counted_through_orbits_gpu_list(tmp_path: Path) -> None:
    fake = tmp_path / "gpus.yaml"
    fake.write_text(
        "gpus:\n"
        "  - {index: 0, name: NVIDIA H100 80GB HBM3 (stand-in), memory_gb: 80}\n"
        "  - {index: 1, name: NVIDIA A100-SXM4-80GB (stand-in), memory_gb: 80}\n"
    )
    tasks = listed(UNSUPPORTED, tmp_path / "home", environ={"ORBIT_FAKE_GPUS": str(fake)})
    assert tasks["two-gpus"].reason == "needs 2 GPUs (H100), this machine has 1"
    fake.write_text(fake.read_text().replace("A100-SXM4", "H100 PCIe"))
    tasks = listed(UNSUPPORTED, tmp_path / "home", environ={"ORBIT_FAKE_GPUS": str(fake)})
    assert tasks["two-gpus"].supported and tasks["two-gpus"].gpus == 2


def test_a_benchmark_folder_that_is_a_task_is_one_task(tmp_path: Path) -> None:
    tasks = adapter(BASIC / "planted", tmp_path).tasks()
    assert [t.name for t in tasks] == ["planted"]
    with pytest.raises(UsageError, match=r"^benchmark gone: cannot list .*/gone \(No such file"):
        adapter(tmp_path / "gone", tmp_path).tasks()


def test_bad_tasks_are_listed_unsupported_never_raised(tmp_path: Path) -> None:
    root = tmp_path / "bench"
    write_task(root, "broken", "[environment\ncpus = 2\n")
    write_task(root, "wrong-type", "[environment]\ncpus = 'two'\n")
    write_task(root, "bad-size", "[environment]\nmemory = '2'\n")
    write_task(root, "big", "[environment]\ncpus = 4096\nmemory_mb = 1073741824\n")
    write_task(root, "no-tests", "", files={"tests/test.sh": ""})
    (root / "no-tests" / "tests" / "test.sh").unlink()
    write_task(root, "no-env", "")
    shutil.rmtree(root / "no-env" / "environment")
    write_task(root, "no-dockerfile", "")
    (root / "no-dockerfile" / "environment" / "Dockerfile").unlink()
    write_task(root, "sep-no-image", "[verifier]\nenvironment_mode = 'separate'\n")
    write_task(root, "features", FEATURES)
    write_task(root, "secret", "[verifier.env]\nKEY = '${ORBIT_TEST_UNSET_KEY}'\n")
    write_task(root, "dup-a", "[task]\nname = 'org/same'\n")
    write_task(root, "dup-b", "[task]\nname = 'org/same'\n")
    (root / "not-a-task").mkdir()
    (root / "not-a-task" / "README.md").write_text("notes\n")
    tasks = adapter(root, tmp_path / "home").tasks()
    reasons = {t.name: t.reason for t in tasks if not t.supported}
    assert "not-a-task" not in {t.name for t in tasks}
    assert reasons["broken"].startswith("task.toml does not parse: ")
    assert reasons["wrong-type"] == "environment.cpus must be a non-negative number"
    assert reasons["bad-size"] == (
        "environment.memory = '2': a size needs a number and a G, M or K suffix"
    )
    assert reasons["big"].startswith("needs 4096 CPUs, this machine has ")
    assert "needs 1048576 GiB of memory, this machine has " in reasons["big"]
    assert reasons["no-tests"] == "no tests/test.sh"
    assert reasons["no-env"] == "no environment/ folder"
    assert reasons["no-dockerfile"] == "no environment/Dockerfile or [environment].docker_image"
    assert reasons["sep-no-image"] == (
        "a separate verifier needs tests/Dockerfile or [verifier.environment].docker_image"
    )
    assert reasons["features"] == (
        "healthchecks not supported; MCP servers not supported; needs TPUs; "
        "[[verifier.collect]] commands not supported; artifact excludes not supported"
    )
    assert reasons["secret"] == (
        "[verifier].env needs $ORBIT_TEST_UNSET_KEY, not set in this environment"
    )
    assert reasons["org/same"] == "another task has the same name (dup-a)"
    assert [t.supported for t in tasks if t.name == "org/same"] == [True, False]


FEATURES = """
artifacts = [{source = "/app/out", exclude = ["*.tmp"]}]
[environment]
mcp_servers = [{name = "fs", transport = "stdio", command = "mcp-fs"}]
tpu = {type = "v5e", topology = "2x2"}
[environment.healthcheck]
command = "true"
[[verifier.collect]]
command = "cat /app/log"
"""


def test_legacy_spellings_and_defaults() -> None:
    cfg = parse_config(
        {
            "version": "1.1",
            "environment": {"memory": "2G", "storage": "10240M", "allow_internet": False},
            "verifier": {"env": {"N": 3}},
        }
    )
    env = cfg.environment
    assert (cfg.schema_version, env.memory_mb, env.storage_mb) == ("1.1", 2048, 10240)
    assert env.network_mode == "no-network"
    assert cfg.verifier_timeout_sec == 600.0 and cfg.verifier_mode == "shared"
    assert cfg.verifier_env == {"N": "3"}
    assert parse_config({"environment": {"allow_internet": True}}).environment.network_mode == (
        "public"
    )
    # memory_mb wins over the legacy spelling; a verifier environment implies separate.
    both = parse_config({"environment": {"memory_mb": 100, "memory": "1G"}, "verifier": {}})
    assert both.environment.memory_mb == 100
    implied = parse_config({"verifier": {"environment": {"docker_image": "x"}}})
    assert implied.verifier_mode == "separate"
    assert implied.verifier_environment and implied.verifier_environment.docker_image == "x"
    assert (size_to_mb("512m", "m"), size_to_mb("2097152K", "m")) == (512, 2048)
    with pytest.raises(TaskTomlError, match="network_mode must be one of"):
        parse_config({"environment": {"network_mode": "open"}})
    with pytest.raises(TaskTomlError, match="environment_mode must be one of"):
        parse_config({"verifier": {"environment_mode": "both"}})


def test_instruction_loses_its_canary_lines() -> None:
    text = instruction_text(BASIC / "hello" / "instruction.md")
    assert text.startswith("Create the file `/app/hello.txt`")
    assert "canary" not in text


# --- phases -----------------------------------------------------------------------------------
def test_solve_phases_for_each_method(tmp_path: Path) -> None:
    harbor = adapter(BASIC, tmp_path / "home", environ={"ORBIT_TEST_GREETING": "Hi"})
    tasks = {t.name: t for t in harbor.tasks()}
    hello = tasks["orbit-test/hello"]
    oracle = harbor.solve(hello, ORACLE, tmp_path / "trial")
    assert oracle.dockerfile == str(BASIC / "hello" / "environment" / "Dockerfile")
    assert oracle.image is None and oracle.commit and oracle.collect == []
    assert (oracle.workdir, oracle.user, oracle.network) == ("/app", None, "bridge")
    assert oracle.env == {
        "GREETING": "Hello",
        "TARGET": "world",
        "DEBIAN_FRONTEND": "noninteractive",
    }
    assert (oracle.cpus, oracle.mem_gb, oracle.timeout_min) == (1.0, 0.25, 2.0)
    targets = {m["target"]: m for m in oracle.mounts}
    assert targets["/logs/agent"] == {"run_dir": "logs/agent", "target": "/logs/agent", "rw": True}
    assert targets["/orbit/bench/solution"] == {
        "source": str(BASIC / "hello" / "solution"),
        "target": "/orbit/bench/solution",
    }
    assert "/logs/verifier" not in targets
    assert oracle.command[:2] == ["bash", "-c"] and "bash /solution/solve.sh" in oracle.command[2]
    empty = harbor.solve(hello, EMPTY, tmp_path / "trial")
    assert empty.command == ["true"] and "TARGET" not in empty.env and empty.commit
    agent = harbor.solve(hello, CODEX, tmp_path / "trial")
    assert agent.command == [] and agent.instruction and agent.instruction.startswith("Create")
    sep = harbor.solve(tasks["separate"], EMPTY, tmp_path / "trial")
    assert sep.collect == ["/app/out.txt"]
    # A named image that exists locally is used as is.
    multi = harbor.solve(tasks["multi-score"], EMPTY, tmp_path / "trial")
    assert (multi.image, multi.dockerfile, multi.workdir) == ("orbit-test/python:3", None, "/work")


def test_solve_environment_variables_and_network(tmp_path: Path) -> None:
    root = tmp_path / "bench"
    write_task(root, "t", ENV_TASK)
    harbor = adapter(root, tmp_path / "home", environ={"TOKEN": "s3cret", "REGION": "eu"})
    [task] = harbor.tasks()
    assert task.supported, task.reason
    solve = harbor.solve(task, ORACLE, tmp_path / "trial")
    assert solve.pass_env == ["TOKEN"]  # its value is never written with the run
    assert solve.env == {
        "ZONE": "eu-1",
        "MODE": "fast",
        "DEBIAN_FRONTEND": "noninteractive",
        "SOLVER": "oracle",
    }
    assert (solve.network, solve.user) == ("none", "agent")
    verify = harbor.verify(task, tmp_path / "trial", "solved:1")
    assert (verify.network, verify.user, verify.timeout_min) == ("bridge", "1000", 2.0)
    assert verify.env == {"ZONE": "eu-1", "MODE": "fast", "PLAIN": "x y"}
    assert verify.pass_env == ["TOKEN", "REGION"]
    script = verify.command[2]
    assert 'export API_KEY="${TOKEN}"\n' in script
    assert 'export URL=https://"${REGION}".example/"${TOKEN}"\n' in script
    assert "export DEPTH=3\n" in script  # the default of an unset variable
    assert "s3cret" not in json.dumps(verify.__dict__) + json.dumps(solve.__dict__)


ENV_TASK = """
[agent]
user = "agent"
network_mode = "no-network"
[environment.env]
TOKEN = "${TOKEN}"
ZONE = "${REGION}-1"
MODE = "${ORBIT_TEST_UNSET_MODE:-fast}"
[solution.env]
SOLVER = "oracle"
[verifier]
timeout_sec = 120
user = 1000
network_mode = "public"
[verifier.env]
API_KEY = "${TOKEN}"
URL = "https://${REGION}.example/${TOKEN}"
DEPTH = "${ORBIT_TEST_UNSET_DEPTH:-3}"
PLAIN = "x y"
"""


def test_a_named_image_is_used_when_local_else_the_dockerfile_is_built(
    tmp_path: Path, python_image: str
) -> None:
    root = tmp_path / "bench"
    write_task(root, "absent", "[environment]\ndocker_image = 'orbit-test/absent:0'\n")
    write_task(root, "upload", UPLOAD, files={"environment/data.csv": "a,b\n"})
    (root / "upload" / "environment" / "Dockerfile").unlink()
    write_task(
        root,
        "sep-named",
        "[verifier.environment]\ndocker_image = 'orbit-test/python:3'\n",
        files={"tests/Dockerfile": "FROM debian:bookworm-slim\n"},
    )
    harbor = adapter(root, tmp_path / "home")
    tasks = {t.name: t for t in harbor.tasks()}
    assert all(t.supported for t in tasks.values()), [t.reason for t in tasks.values()]
    absent = harbor.solve(tasks["absent"], EMPTY, tmp_path / "t1")
    assert (absent.image, absent.dockerfile) == (None, str(root / "absent/environment/Dockerfile"))
    # A named image without a Dockerfile gets environment/'s files in its working directory.
    upload = harbor.solve(tasks["upload"], EMPTY, tmp_path / "t2")
    assert upload.image is None and upload.dockerfile == str(tmp_path / "t2/environment/Dockerfile")
    assert Path(upload.dockerfile).read_text() == "FROM orbit-test/python:3\nCOPY . /data\n"
    assert (tmp_path / "t2/environment/data.csv").read_text() == "a,b\n"
    sep = harbor.verify(tasks["sep-named"], tmp_path / "t3", "solved:1")
    assert (sep.image, sep.dockerfile) == ("orbit-test/python:3", None)


UPLOAD = """
[environment]
docker_image = "orbit-test/python:3"
workdir = "/data"
"""


def test_verify_phases_shared_and_separate(tmp_path: Path) -> None:
    harbor = adapter(BASIC, tmp_path / "home")
    tasks = {t.name: t for t in harbor.tasks()}
    trial = tmp_path / "trial"
    shared = harbor.verify(tasks["planted"], trial, "orbit-bench/j1-planted:solved")
    assert (shared.image, shared.dockerfile, shared.commit) == (
        "orbit-bench/j1-planted:solved",
        None,
        False,
    )
    targets = {m["target"]: m for m in shared.mounts}
    assert targets["/logs/verifier"]["run_dir"] == "logs/verifier"
    assert targets["/tests"] == {"run_dir": "tests", "target": "/tests", "rw": True}
    assert shared.run_dirs == ["logs/verifier", "tests"]
    assert shared.timeout_min == 1.0 and shared.workdir == "/app"
    assert "bash /tests/test.sh 2>&1 | tee /logs/verifier/test-stdout.txt" in shared.command[2]
    # Separate: a fresh image from tests/, and only what the engine collected, read-only.
    (trial / "artifacts" / "app").mkdir(parents=True)
    (trial / "artifacts" / "app" / "out.txt").write_text("42\n")
    (trial / "logs" / "artifacts").mkdir(parents=True)
    sep = harbor.verify(tasks["separate"], trial, "orbit-bench/j1-separate:solved")
    assert sep.image is None
    assert sep.dockerfile == str(BASIC / "separate" / "tests" / "Dockerfile")
    assert (sep.network, sep.workdir) == ("none", "/app")
    targets = {m["target"]: m for m in sep.mounts}
    assert targets["/app/out.txt"] == {
        "source": str(trial / "artifacts" / "app" / "out.txt"),
        "target": "/app/out.txt",
    }
    assert targets["/logs/artifacts"] == {
        "source": str(trial / "logs" / "artifacts"),
        "target": "/logs/artifacts",
    }
    assert "/tests" not in targets


# --- scores -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("files", "valid", "score", "reason"),
    [
        ({"reward.txt": "1\n"}, True, 1.0, None),
        ({"reward.txt": "0.25"}, True, 0.25, None),
        ({"reward.json": '{"reward": 0, "acc": 1}', "reward.txt": "1"}, True, 0.0, None),
        ({"reward.json": '{"acc": 0.5}'}, True, 0.5, None),
        ({"reward.json": '{"acc": 1, "cov": 0.5}'}, True, 0.75, None),
        ({}, False, None, "no reward file (reward.json or reward.txt)"),
        ({"reward.txt": ""}, False, None, "reward.txt is empty"),
        ({"reward.txt": "  \n"}, False, None, "reward.txt is empty"),
        ({"reward.txt": "pass"}, False, None, "reward.txt is not a number: 'pass'"),
        ({"reward.txt": "nan"}, False, None, "reward.txt is not a finite number"),
        ({"reward.json": ""}, False, None, "reward.json is empty"),
        ({"reward.json": "{oops", "reward.txt": "1"}, False, None, "reward.json is not JSON"),
        ({"reward.json": "[1]"}, False, None, "reward.json is not an object of numbers"),
        ({"reward.json": "{}"}, False, None, "reward.json is not an object of numbers"),
        (
            {"reward.json": '{"reward": {"a": 1}}'},
            False,
            None,
            "reward.json: 'reward' is not a number",
        ),
        ({"reward.json": '{"ok": true}'}, False, None, "reward.json: 'ok' is not a number"),
    ],
)
def test_score_reads_json_before_txt_and_never_guesses(
    tmp_path: Path, files: dict[str, str], valid: bool, score: float | None, reason: str | None
) -> None:
    folder = tmp_path / "run" / "logs" / "verifier"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    result = score_rewards(tmp_path / "run")
    assert (result.valid, result.score, result.reason) == (valid, score, reason)
    if valid:
        assert result.scores == {k: float(v) for k, v in result.scores.items()}


# --- the phases, run for real ---------------------------------------------------------------------
def run_phase(orbit: Orbit, phase: Phase, label: str, commit: str | None = None) -> Path:
    """Submit the phase as an Orbit run, as the bench engine does; wait; the run directory."""
    from orbit.bench.runs import phase_request
    from orbit.execute.submit import prepare, submit

    req = phase_request(phase, label, commit=commit)
    req.cpus, req.mem_gb = phase.cpus or 1, phase.mem_gb or 0.5
    home = Home(orbit.home, orbit.environ)
    prepared = prepare(home, req, cwd=orbit.cwd, environ=orbit.environ, progress=lambda _: None)
    run = submit(home, prepared, actor="test")
    res = orbit("wait", run.id)
    assert res.code in (0, 1), res.err
    return orbit.run_dir(run.id)


def exit_record(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / "exit.json").read_text()))


def collect(image: str, paths: list[str], trial: Path, solve_dir: Path) -> None:
    """What the engine keeps of a solve for a separate verifier (orbit/bench/collect.py)."""
    import docker
    import docker.errors

    container = docker.from_env().containers.create(image, command=["true"])
    try:
        for path in paths:
            try:
                data = _file_bytes(container, path)
            except docker.errors.NotFound:  # not made by the solve: not mounted
                continue
            dest = trial / "artifacts" / path.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
    finally:
        container.remove(force=True)
    shutil.copytree(solve_dir / "logs" / "artifacts", trial / "logs" / "artifacts")


def _file_bytes(container: Any, path: str) -> bytes:
    import io
    import tarfile

    stream, _ = container.get_archive(path)
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.extractfile(tar.getmembers()[0])
        assert member is not None
        return member.read()


def remove_image(tag: str) -> None:
    import docker
    import docker.errors

    try:
        docker.from_env().images.remove(tag, force=True)
    except docker.errors.ImageNotFound:
        pass


def trial(
    orbit: Orbit, harbor: HarborAdapter, task: Task, method: Method, tmp_path: Path
) -> tuple[Path, Path | None, Any]:
    """(solve run dir, verify run dir or None, score or None): one trial by hand."""
    folder = tmp_path / "trials" / f"{task.name.replace('/', '-')}-{method.name}"
    folder.mkdir(parents=True)
    tag = f"orbit-test-bench/{folder.name}-{uuid.uuid4().hex[:8]}:solved"  # apart from other runs
    solve = harbor.solve(task, method, folder)
    solve_dir = run_phase(orbit, solve, f"{folder.name}.solve", commit=tag)
    record = exit_record(solve_dir)
    image = record["committed_image"]
    try:
        if record.get("oom_killed"):
            return solve_dir, None, None
        if task.data["mode"] == "separate":
            collect(image, solve.collect, folder, solve_dir)
        verify = harbor.verify(task, folder, image)
        verify_dir = run_phase(orbit, verify, f"{folder.name}.verify")
    finally:
        remove_image(tag)
    return solve_dir, verify_dir, harbor.score(task, verify_dir)


@pytest.fixture
def basic(orbit: Orbit, python_image: str) -> dict[str, Task]:
    ensure_debian_image()
    return {t.name: t for t in adapter(BASIC, orbit.home, environ=orbit.environ).tasks()}


def test_oracle_solves_hello_and_empty_does_not(
    orbit: Orbit, basic: dict[str, Task], tmp_path: Path
) -> None:
    harbor = adapter(BASIC, orbit.home, environ=orbit.environ)
    hello = basic["orbit-test/hello"]
    solve_dir, verify_dir, score = trial(orbit, harbor, hello, ORACLE, tmp_path)
    # greet ran: only COPY --chmod made it executable; its output is in /logs/agent/oracle.txt.
    assert (solve_dir / "logs" / "agent" / "oracle.txt").read_text() == "wrote /app/hello.txt\n"
    assert (solve_dir / "solution" / "solve.sh").is_file()
    assert verify_dir is not None
    assert exit_record(verify_dir)["exit_code"] == 3  # test.sh's exit code does not count
    assert (score.valid, score.score) == (True, 1.0)
    assert (verify_dir / "logs" / "verifier" / "test-stdout.txt").is_file()
    _, _, score = trial(orbit, harbor, hello, EMPTY, tmp_path)
    assert (score.valid, score.score, score.scores) == (True, 0.0, {"reward": 0.0})
    # [verifier.env] EXPECTED = "${ORBIT_TEST_EXPECTED:-…}": the caller's value reaches the
    # verifier as a secret (the oracle's greeting no longer matches) and is not stored.
    orbit.environ["ORBIT_TEST_EXPECTED"] = "Hello, moon!"
    harbor = adapter(BASIC, orbit.home, environ=orbit.environ)
    _, verify_dir, score = trial(orbit, harbor, hello, Method("again", "oracle"), tmp_path)
    assert (score.valid, score.score) == (True, 0.0)
    assert "moon" not in (verify_dir / "run.yaml").read_text()


def test_the_agent_and_verifier_users(orbit: Orbit, basic: dict[str, Task], tmp_path: Path) -> None:
    harbor = adapter(BASIC, orbit.home, environ=orbit.environ)
    solve_dir, _, score = trial(orbit, harbor, basic["as-user"], ORACLE, tmp_path)
    assert (score.valid, score.score) == (True, 1.0)
    assert (solve_dir / "logs" / "agent" / "oracle.txt").is_file()


def test_several_numbers_a_planted_reward_and_no_reward(
    orbit: Orbit, basic: dict[str, Task], tmp_path: Path
) -> None:
    harbor = adapter(BASIC, orbit.home, environ=orbit.environ)
    _, _, score = trial(orbit, harbor, basic["multi-score"], ORACLE, tmp_path)
    assert (score.valid, score.score) == (True, pytest.approx(7 / 3))  # the mean of 1, 1 and 5
    assert score.scores == {"accuracy": 1.0, "complete": 1.0, "lines": 5.0}
    _, _, score = trial(orbit, harbor, basic["multi-score"], EMPTY, tmp_path)
    assert score.scores == {"accuracy": 0.0, "complete": 0.0, "lines": 0.0}
    _, verify_dir, score = trial(orbit, harbor, basic["planted"], ORACLE, tmp_path)
    assert (score.valid, score.score) == (True, 0.0)
    assert not (verify_dir / "logs" / "verifier" / "reward.json").exists()
    _, _, score = trial(orbit, harbor, basic["no-reward"], ORACLE, tmp_path)
    assert (score.valid, score.score) == (False, None)
    assert score.reason == "no reward file (reward.json or reward.txt)"


def test_separate_verifier_sees_only_the_artifacts(
    orbit: Orbit, basic: dict[str, Task], tmp_path: Path
) -> None:
    harbor = adapter(BASIC, orbit.home, environ=orbit.environ)
    _, _, score = trial(orbit, harbor, basic["separate"], ORACLE, tmp_path)
    assert score.scores == {"reward": 1.0, "artifact": 1.0, "isolated": 1.0, "logs": 1.0}
    _, _, score = trial(orbit, harbor, basic["separate"], EMPTY, tmp_path)
    assert score.scores == {"reward": 0.0, "artifact": 0.0, "isolated": 1.0, "logs": 0.0}


def test_a_memory_hog_is_killed_and_a_slow_solve_is_graded(
    orbit: Orbit, basic: dict[str, Task], tmp_path: Path
) -> None:
    harbor = adapter(BASIC, orbit.home, environ=orbit.environ)
    solve_dir, verify_dir, _ = trial(orbit, harbor, basic["oom"], ORACLE, tmp_path)
    record = exit_record(solve_dir)
    assert record["oom_killed"] and record["exit_code"] == 137 and verify_dir is None
    solve_dir, _, score = trial(orbit, harbor, basic["slow"], ORACLE, tmp_path)
    assert exit_record(solve_dir)["timed_out"]
    assert score.scores == {"reward": 0.5, "finished": 0.0}


def test_fixture_dockerfiles_build_with_buildkit(
    orbit: Orbit, python_image: str, tmp_path: Path
) -> None:
    """Every fixture Dockerfile builds through execute/build.py; a fresh copy of hello's context
    (a nonce makes its tag new) really builds, and its COPY --chmod gives the script mode 755."""
    import docker

    from orbit.execute.build import build_image
    from orbit.execute.engine import Engine

    ensure_debian_image()
    client = docker.from_env()
    engine = Engine()
    home = Home(orbit.home, orbit.environ)
    for dockerfile in sorted(BASIC.glob("*/*/Dockerfile")):
        built = build_image(engine, home, dockerfile, orbit.environ, lambda _: None)
        assert client.images.get(built.tag)
    context = tmp_path / "environment"
    shutil.copytree(BASIC / "hello" / "environment", context)
    (context / "nonce").write_text(str(tmp_path))
    assert (context / "greet.sh").stat().st_mode & 0o777 == 0o644
    built = build_image(engine, home, context / "Dockerfile", orbit.environ, lambda _: None)
    try:
        assert not built.reused and "COPY --chmod=755 greet.sh" in built.log
        out = client.containers.run(
            built.tag, ["stat", "-c", "%a", "/usr/local/bin/greet"], remove=True
        )
        assert out.decode().strip() == "755"
    finally:
        remove_image(built.tag)
