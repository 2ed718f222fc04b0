"""Stand-in for asibench 0.2.0's command line (`python -m ai4sci_bench.cli`), for tests where
Hugging Face (the instances) cannot be reached. It keeps what Orbit depends on: `run` with the
options Orbit passes (one task's instances from --instances-dir at --prompt-levels, a workspace
per instance under --output-dir holding data/ and prompt.md, the --agent-cmd run there, one
result JSON per instance, --fail-on-agent-error: exit 1 when the attempt failed) and `score`
(--repo seed31415 only; a report in schema_version 2 at --output). Its "scorer" gives 100 when
the workspace's answer.txt equals the instance's reference/answer.txt, else 0. The checked lines
of the real package (--fail-on-agent-error, the sandbox timeout fix) are present. See
docs/testing.md.
"""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    out = Path(args.output_dir)
    failed = 0
    for instance in sorted(Path(args.instances_dir).glob(f"{args.tasks}__*")):
        for level in args.prompt_levels.split(","):
            workspace = out / "instances" / f"{instance.name}_{level}"
            workspace.mkdir(parents=True)
            shutil.copytree(instance / "data", workspace / "data")
            shutil.copy(instance / f"prompt_{level}.md", workspace / "prompt.md")
            command = (args.agent_cmd or "false").replace("{workspace}", str(workspace))
            done = subprocess.run(["sh", "-c", command], cwd=workspace, timeout=args.timeout)
            status = "completed" if done.returncode == 0 else "failed"
            failed += status != "completed"
            result = {
                "task_id": args.tasks,
                "instance_id": instance.name,
                "prompt_level": level,
                "attempt": 1,
                "status": status,
                "workspace": str(workspace),
                "reference_visible": (instance / "reference").exists(),
            }
            (out / f"{instance.name}_{level}.json").write_text(json.dumps(result))
    return 1 if failed and args.fail_on_agent_error else 0


def score(args: argparse.Namespace) -> int:
    if args.repo != "seed31415":
        print("seed42 references are private", file=sys.stderr)
        return 1
    results = []
    for path in sorted(Path(args.results_dir).glob("*.json")):
        item = json.loads(path.read_text())
        reference = Path(args.instances_dir) / item["instance_id"] / "reference" / "answer.txt"
        answer = Path(args.results_dir) / "instances" / Path(item["workspace"]).name / "answer.txt"
        right = answer.is_file() and answer.read_text() == reference.read_text()
        results.append(
            {
                "task_id": item["task_id"],
                "instance_id": item["instance_id"],
                "prompt_level": item["prompt_level"],
                "attempt": item["attempt"],
                "evaluation_status": "completed",
                "final_score": 100.0 if right else 0.0,
                "max_score": 100.0,
                "reference_was_visible": item["reference_visible"],
            }
        )
    report = {"schema_version": 2, "repo": "seed31415", "official": False, "results": results}
    Path(args.output).write_text(json.dumps(report))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="asibench")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run")
    for option in ("--instances-dir", "--tasks", "--prompt-levels", "--tasks-dir", "--output-dir"):
        p.add_argument(option, required=True)
    p.add_argument("--sandbox", default="none")
    p.add_argument("--timeout", type=int, default=10800)
    p.add_argument("--fail-on-agent-error", action="store_true")
    p.add_argument("--agent-cmd")
    p.add_argument("--agent")
    p.add_argument("--agent-config", default="{}")
    s = sub.add_parser("score")
    for option in ("--repo", "--results-dir", "--instances-dir", "--tasks-dir", "--output"):
        s.add_argument(option, required=True)
    args = parser.parse_args()
    return run(args) if args.command == "run" else score(args)


if __name__ == "__main__":
    sys.exit(main())
