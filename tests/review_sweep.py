"""A realistic learning-rate × seed sweep for the review tests (best, lessons), and a group in
the shape of the agent trial's (trial_group), written by hand for the web's review pages.

train.py does gradient descent on w² from w = 1, logs `{"step", "loss"}` to $ORBIT_METRICS
each step, and reports a validation loss with seed-dependent noise. lr=50 overshoots: w grows
ninefold a step and the script raises FloatingPointError after a few steps (a traceback, exit
1). lr=1 converges (loss 0.11, 0.12, 0.13: the best mean). lr=0.1 converges slowly and its
validation noise is large: seed 2 lands at 0.0485, the single best run, but its mean is 0.23.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Orbit, git_repo

from orbit.store.model import RunState
from orbit.store.runs import RunStore

TRAIN = """\
import json, math, os, sys

lr, seed = float(sys.argv[1]), int(sys.argv[2])
w = 1.0
with open(os.environ["ORBIT_METRICS"], "a") as metrics:
    for step in range(1, 61):
        w -= lr * 0.1 * 2 * w
        loss = w * w
        if not math.isfinite(loss) or loss > 1e6:
            raise FloatingPointError(f"loss diverged to {loss:.3g} at step {step} (lr={lr})")
        metrics.write(json.dumps({"step": step, "loss": loss}) + "\\n")
        metrics.flush()
# validation: small steps end in seed-dependent places, large ones all near the optimum
jitter = [0.20, -0.04, 0.25][seed - 1] if lr < 0.5 else 0.10 + 0.01 * seed
with open(os.environ["ORBIT_METRICS"], "a") as metrics:
    metrics.write(json.dumps({"step": 61, "loss": w * w + jitter}) + "\\n")
print(f"done: lr={lr} seed={seed}")
"""

LRS = ("0.1", "1", "50")
SEEDS = ("1", "2", "3")


def project(tmp: Path) -> Path:
    return git_repo(tmp / "proj", {"train.py": TRAIN})


Swept = dict[tuple[str, str], str]


def lr_sweep(orbit: Orbit, image: str, repo: Path, group: str = "lrs") -> Swept:
    """Run the 3 × 3 sweep to the end (from `repo`, with its code snapshot): (lr, seed) → id."""
    res = orbit(
        "sweep", "--json", "-w", "--image", image, "--cpus", "0.5", "--mem", "0.25",
        "-g", group, "-p", f"lr={','.join(LRS)}", "-p", f"seed={','.join(SEEDS)}",
        "-n", "lr{lr}-s{seed}", "--", "python3", "train.py", "{lr}", "{seed}",
        cwd=repo,
    )  # fmt: skip
    assert res.code == 1, res.err  # the lr=50 runs fail
    runs = res.json()["runs"]
    assert len(runs) == 9
    states = {(r["params"]["lr"], r["params"]["seed"]): r["state"] for r in runs}
    assert [k for k, s in states.items() if s == "failed"] == [("50", s) for s in SEEDS], states
    return {(r["params"]["lr"], r["params"]["seed"]): str(r["id"]) for r in runs}


# The agent trial's shape, written by hand (no containers): each run logs a counter first
# ({"step", "train_docs"}: 600 docs at the end of every run), then {"acc", "loss"}. By acc
# (higher is better) alpha=1 is best (0.92 ± 0.01), then 5, then 0.1; by loss (lower) alpha=5
# (0.18), then 1, then 0.1. alpha=50 fails in every seed, alpha=0.1 in seed 3.
TRIAL = {"0.1": (0.70, 0.50), "1": (0.90, 0.30), "5": (0.85, 0.20), "50": (0.0, 0.0)}


def trial_failed(alpha: str, seed: str) -> bool:
    return alpha == "50" or (alpha, seed) == ("0.1", "3")


def trial_group(store: RunStore, group: str = "nb") -> Swept:
    """The 4 alphas × 3 seeds of the trial's shape as finished runs of `group`: (alpha, seed)
    → id."""
    out: Swept = {}
    for alpha, (acc, loss) in TRIAL.items():
        for seed in SEEDS:
            failed = trial_failed(alpha, seed)
            spec = {
                "name": f"a{alpha}-s{seed}",
                "group": group,
                "params": {"alpha": alpha, "seed": seed},
                "image": "python:3.12-slim",
                "command": ["python3", "nb.py", alpha, seed],
                "resources": {"cpus": 0.5, "mem_gb": 0.25, "gpus": 0},
            }
            run = store.create(
                spec,
                state=RunState.FAILED if failed else RunState.SUCCEEDED,
                reason="exit code 1" if failed else "",
                actor="test",
                status_fields={"exit_code": 1 if failed else 0},
            )
            rows = [{"step": step, "train_docs": 200 * step} for step in (1, 2, 3)]
            if not failed:
                rows.append({"acc": round(acc + 0.01 * int(seed), 4),
                             "loss": round(loss - 0.01 * int(seed), 4)})  # fmt: skip
            run.path("metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            if failed:
                run.path("log.txt").write_text(
                    "Traceback (most recent call last):\n"
                    '  File "nb.py", line 6, in <module>\n'
                    f"FloatingPointError: nll diverged (alpha={alpha})\n"
                )
            out[(alpha, seed)] = run.id
    return out
