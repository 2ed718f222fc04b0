"""`orbit bench compare` and `usage` on a real job driven by the engine (the toy benchmark of
test_bench_engine.py), and the --resources file `usage -o` writes read back by `bench add`:
the next job's solve runs get the measured task's entry, and `*` for a task without one."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from conftest import Orbit
from test_bench_engine import ADAPTER, bench, by_key, run_job  # noqa: F401


def test_a_real_job_compared_measured_and_its_resources_used(bench: Orbit, tmp_path: Path) -> None:  # noqa: F811
    picks = ["-t", "add", "-t", "noreward", "-t", "hog"]
    code, job = run_job(bench, *picks, "-m", "oracle", "-m", "empty")
    assert code == 1 and job["job"]["state"] == "finished"
    job_id = job["job"]["id"]
    trials = by_key(job)

    res = bench("bench", "compare", job_id, "--json")
    assert res.code == 0, res.err
    data = res.json()
    assert data["paired"]["tasks"] == ["add"]
    left = {x["task"]: x["reason"] for x in data["paired"]["left_out"]}
    assert (
        left["noreward"] == "oracle: 1 invalid (no reward file); empty: 1 invalid (no reward file)"
    )
    assert left["hog"].startswith("oracle: 1 invalid (the solve was killed for memory")
    assert [(m["label"], m["paired_mean"]) for m in data["methods"]] == [
        ("oracle", 1.0),
        ("empty", 0.0),
    ]
    cells = {row["task"]: row["cells"] for row in data["tasks"]}
    add = cells["add"]["oracle"]["trials"][0]
    assert add["runs"] == trials[("add", "oracle")]["runs"]

    out = tmp_path / "resources.json"
    res = bench("bench", "usage", job_id, "-o", str(out), "--json")
    assert res.code == 0, res.err
    usage = {t["task"]: t for t in res.json()["tasks"]}
    hog = usage["hog"]
    assert len(hog["runs"]) == 2 and any("killed for memory" in n for n in hog["notes"])
    # Quick solves (often ended before the first sample, then counted with no measured use).
    assert usage["add"]["suggested"] == {"cpus": 1, "mem_gb": 0.5, "gpus": 0, "timeout_min": 1}
    assert len(usage["add"]["runs"]) == 2
    assert all(n.startswith("ended before the first sample") for n in usage["add"]["notes"])
    document = json.loads(out.read_text())
    assert set(document) == {"add", "noreward", "hog", "*"}
    assert document["hog"]["mem_gb"] >= 0.5 and document["*"]["mem_gb"] == max(
        document[t]["mem_gb"] for t in ("add", "noreward", "hog")
    )

    # The file is a --resources file: a benchmark registered with it solves `add` with its
    # entry and `sep` (not measured) with `*`.
    document["add"].update(cpus=1, mem_gb=0.75, timeout_min=3)
    document["*"].update(cpus=2, mem_gb=0.5, timeout_min=4)
    out.write_text(json.dumps(document))
    root = tmp_path / "toy2"  # two tasks of the toy benchmark (the fixture wrote tmp_path/toy)
    for name in ("add", "sep"):
        (root / name).mkdir(parents=True)
        (root / name / "task.json").write_text((tmp_path / "toy" / name / "task.json").read_text())
    res = bench("bench", "add", "toy2", str(root), "--adapter", ADAPTER, "--resources", str(out))
    assert res.code == 0, res.err
    res = bench("bench", "run", "toy2", "-m", "oracle", "-w", "--json")
    assert res.code == 0, res.err
    again = by_key(res.json())
    for task, (cpus, mem, timeout) in {"add": (1, 0.75, 3), "sep": (2, 0.5, 4)}.items():
        run_id = again[(task, "oracle")]["runs"]["solve"]
        spec = yaml.safe_load((bench.home / "runs" / run_id / "run.yaml").read_text())
        assert (spec["resources"]["cpus"], spec["resources"]["mem_gb"]) == (cpus, mem), task
        assert spec["timeout_min"] == timeout, task
