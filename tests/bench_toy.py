"""A toy benchmark adapter for the engine's tests (`--adapter python:bench_toy:ToyAdapter`).

Each task is DIR/<task>/task.json: {"image", "solve" (the oracle's shell script), "check" (the
verifier's shell script, writing /logs/verifier/reward.txt or reward.json), optional "cpus",
"mem_gb", "timeout_min", "workdir", "collect" (artifact paths), "separate" (verify in a fresh
image that gets only the artifacts), "unsupported" (the reason), "instruction"}. It follows the
Harbor conventions of docs/bench.md: /logs/agent and /logs/artifacts in the solve,
a fresh /logs/verifier in the verify, reward.json before reward.txt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orbit.bench.collect import LOG_ARTIFACTS, artifact_path
from orbit.bench.model import Benchmark, Method, Phase, Score, Task
from orbit.store.home import Home

SOLVE_MOUNTS = [
    {"run_dir": "logs/agent", "target": "/logs/agent", "rw": True},
    {"run_dir": "logs/artifacts", "target": "/logs/artifacts", "rw": True},
]
VERIFY_MOUNTS = [{"run_dir": "logs/verifier", "target": "/logs/verifier", "rw": True}]


class ToyAdapter:
    def __init__(self, bench: Benchmark, home: Home) -> None:
        self.root = Path(bench.dir)

    def tasks(self) -> list[Task]:
        out = []
        for path in sorted(self.root.glob("*/task.json")):
            data: dict[str, Any] = json.loads(path.read_text())
            why = data.get("unsupported")
            out.append(
                Task(
                    name=path.parent.name,
                    supported=why is None,
                    reason=why,
                    cpus=data.get("cpus", 0.25),
                    mem_gb=data.get("mem_gb", 0.25),
                    timeout_min=data.get("timeout_min"),
                    data=data,
                )
            )
        return out

    def solve(self, task: Task, method: Method, trial_dir: Path) -> Phase:
        data = task.data
        phase = Phase(
            command=["true"],
            image=data["image"],
            workdir=data.get("workdir"),
            mounts=list(SOLVE_MOUNTS),
            run_dirs=["logs/agent", "logs/artifacts"],
            cpus=task.cpus,
            mem_gb=task.mem_gb,
            timeout_min=task.timeout_min,
            commit=True,
            collect=list(data.get("collect") or []),
        )
        if method.agent == "oracle":
            phase.command = ["sh", "-c", data["solve"]]
        elif method.agent in ("codex", "claude-code"):
            phase.command = []
            phase.instruction = data.get("instruction", "")
        return phase

    def verify(self, task: Task, trial_dir: Path, solved_image: str | None) -> Phase:
        data = task.data
        mounts = list(VERIFY_MOUNTS)
        image = solved_image
        if data.get("separate"):
            image = data["image"]
            for path in data.get("collect") or []:
                kept = artifact_path(trial_dir, path)
                if kept.exists():
                    mounts.append({"source": str(kept), "target": path})
            logs = trial_dir / LOG_ARTIFACTS
            mounts.append({"source": str(logs), "target": "/logs/artifacts"})
        return Phase(
            command=["sh", "-c", data["check"]],
            image=image,
            workdir=data.get("workdir"),
            mounts=mounts,
            run_dirs=["logs/verifier"],
            cpus=0.25,
            mem_gb=0.25,
            timeout_min=data.get("verify_timeout_min"),
        )

    def score(self, task: Task, verify_output: Path) -> Score:
        folder = verify_output / "logs" / "verifier"
        try:
            if (folder / "reward.json").exists():
                scores = json.loads((folder / "reward.json").read_text())
            else:
                scores = {"reward": float((folder / "reward.txt").read_text())}
        except FileNotFoundError:
            return Score(valid=False, reason="no reward file")
        except ValueError as exc:
            return Score(valid=False, reason=f"unparseable reward ({exc})")
        return Score(valid=True, score=float(scores["reward"]), scores=scores)
