"""A realistic learning-rate × seed sweep for the review tests (best, lessons).

train.py does gradient descent on w² from w = 1, logs `{"step", "loss"}` to $ORBIT_METRICS
each step, and reports a validation loss with seed-dependent noise. lr=50 overshoots: w grows
ninefold a step and the script raises FloatingPointError after a few steps (a traceback, exit
1). lr=1 converges (loss 0.11, 0.12, 0.13: the best mean). lr=0.1 converges slowly and its
validation noise is large: seed 2 lands at 0.0485, the single best run, but its mean is 0.23.
"""

from __future__ import annotations

from pathlib import Path

from conftest import Orbit, git_repo

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
