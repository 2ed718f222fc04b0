#!/usr/bin/env python3
"""A complete Orbit bench adapter (protocol 1) for `arith`, a tiny arithmetic benchmark.

Each task is tasks/<name>.json: {"expression": "17 * 23", "answer": 391}, optionally
"timeout_min" and "os" (a task for another OS is listed as unsupported). A solve writes the
result to /work/answer.txt, which Orbit collects from the solved container; a fresh verify
container receives the collected files read-only and writes /logs/verifier/score.json, which
`score` reads. The oracle writes the right answer, `empty` writes nothing (score 0), an agent
method gets the instruction.

    orbit bench add arith examples/bench-adapters/arith \
        --adapter examples/bench-adapters/arith/adapter.py -c image=busybox:1.36
    orbit bench run arith -m oracle -m empty -w

Python standard library only. Protocol: docs/guides/bench-adapter.md.
"""

import json
import os
import sys
from pathlib import Path

PROTOCOL = 1
ANSWER = "/work/answer.txt"
VERIFY = """\
expected="$EXPECTED"
got=$(tr -d ' \\n' < /orbit/artifacts/work/answer.txt 2>/dev/null)
if [ -n "$got" ] && [ "$got" = "$expected" ]; then c=1; else c=0; fi
echo "expected $expected, got ${got:-nothing}"
printf '{"correct": %s}\\n' "$c" > /logs/verifier/score.json
"""


def main() -> int:
    request = json.load(sys.stdin)
    if request.get("protocol") != PROTOCOL:
        return answer({"error": f"arith speaks protocol {PROTOCOL} only"})
    handler = HANDLERS.get(request.get("op"))
    if handler is None:
        return answer({"error": f"unknown op {request.get('op')!r}"})
    try:
        return answer(handler(request))
    except (OSError, ValueError, KeyError) as exc:  # reported in Orbit's one-line error
        print(f"arith: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def answer(body: dict) -> int:
    json.dump({"protocol": PROTOCOL, **body}, sys.stdout)
    sys.stdout.write("\n")
    return 0


def hello(request: dict) -> dict:
    return {"name": "arith", "version": "1.0", "protocols": [PROTOCOL]}


def tasks(request: dict) -> dict:
    folder = Path(request["benchmark"]["dir"]) / "tasks"
    out = []
    for path in sorted(folder.glob("*.json")):
        spec = json.loads(path.read_text())
        task = {"name": path.stem, "data": {"file": str(path)}}
        if spec.get("timeout_min"):
            task["timeout_min"] = spec["timeout_min"]
        if spec.get("os", "linux") != "linux":
            task.update(supported=False, reason=f"needs {spec['os'].capitalize()}")
        out.append(task)
    return {"tasks": out}


def spec_of(request: dict) -> dict:
    return json.loads(Path(request["task"]["data"]["file"]).read_text())


def image(request: dict) -> str:
    return request["benchmark"]["config"].get("image", "busybox:1.36")


def solve(request: dict) -> dict:
    spec, method = spec_of(request), request["method"]
    phase = {
        "image": image(request),
        "network": "none",
        "commit": True,  # Orbit copies ANSWER out of the solved container's file system
        "collect": [ANSWER],
        "mounts": [{"run_dir": "logs/agent", "target": "/logs/agent", "rw": True}],
        "timeout_min": spec.get("timeout_min", 5),
        "cpus": 1,
        "mem_gb": 0.25,
    }
    if method["agent"] == "oracle":
        solution = Path(request["trial_dir"]) / "oracle"
        solution.mkdir(parents=True, exist_ok=True)
        (solution / "answer.txt").write_text(f"{spec['answer']}\n")
        phase["mounts"].append({"source": str(solution), "target": "/orbit/bench/solution"})
        copy = f"mkdir -p /work && cp /orbit/bench/solution/answer.txt {ANSWER}"
        phase["command"] = ["sh", "-c", copy]
    elif method["agent"] == "empty":
        phase["command"] = ["true"]
    else:  # an agent: Orbit builds its command from the instruction
        phase["command"] = []
        phase["network"] = "bridge"  # the agent talks to its model
        phase["instruction"] = (
            f"Compute {spec['expression']} (** is a power). Write the result as a plain "
            f"integer, nothing else, to {ANSWER} (create the folder if needed)."
        )
    return {"phase": phase}


def verify(request: dict) -> dict:
    spec = spec_of(request)
    artifacts = Path(request["trial_dir"]) / "artifacts"  # what Orbit collected from the solve
    os.makedirs(artifacts, exist_ok=True)
    return {
        "phase": {
            "image": image(request),
            "network": "none",
            "command": ["sh", "-c", VERIFY],
            "env": {"EXPECTED": str(spec["answer"])},
            "mounts": [
                {"source": str(artifacts), "target": "/orbit/artifacts"},
                {"run_dir": "logs/verifier", "target": "/logs/verifier", "rw": True},
            ],
            "timeout_min": 1,
            "cpus": 1,
            "mem_gb": 0.25,
        }
    }


def score(request: dict) -> dict:
    path = Path(request["verify_output"]) / "logs" / "verifier" / "score.json"
    try:
        result = json.loads(path.read_text())
        correct = float(result["correct"])
    except FileNotFoundError:
        return {"valid": False, "reason": "the verifier wrote no score.json"}
    except (ValueError, KeyError, TypeError):
        return {"valid": False, "reason": "score.json cannot be read"}
    return {"valid": True, "score": correct, "scores": {"correct": correct}}


HANDLERS = {"hello": hello, "tasks": tasks, "solve": solve, "verify": verify, "score": score}

if __name__ == "__main__":
    sys.exit(main())
