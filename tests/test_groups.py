"""A group's objective and launches, end to end against Docker: declared at the sweep, picked
when none is, changed later, and used alike by best, lessons, compare and ps --sort; then
`orbit sweep --like` extends the sweep with the same request.

nb.py has the agent trial's shape: per step {step, train_docs (a counter, 600 at the end in
every run), dev_acc, dev_nll}, then {test_acc, test_nll}. By test_acc alpha=1 is best; by
dev_nll alpha=5 is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Orbit, git_repo

from orbit.errors import ExitCode
from orbit.store.groups import GROUP_FILE, group_dir
from orbit.store.home import Home

NB = """\
import json, os, sys
alpha, seed = sys.argv[1], int(sys.argv[2])
acc = {"0.1": 0.70, "1": 0.90, "5": 0.85}[alpha] + 0.01 * seed
nll = {"0.1": 0.50, "1": 0.30, "5": 0.20}[alpha]
with open(os.environ["ORBIT_METRICS"], "a") as m:
    for step in range(1, 4):
        row = {"step": step, "train_docs": 200 * step, "dev_acc": acc - 0.05, "dev_nll": nll}
        m.write(json.dumps(row) + "\\n")
    m.write(json.dumps({"test_acc": acc, "test_nll": 1.2 - acc}) + "\\n")
"""


@pytest.fixture
def nb(orbit: Orbit, python_image: str, tmp_path: Path) -> Path:
    repo = git_repo(tmp_path / "nb", {"nb.py": NB})
    res = orbit(
        "sweep", "-w", "--image", python_image, "--cpus", "0.5", "--mem", "0.25",
        "--max-running", "2", "-g", "nb", "-n", "a{alpha}-s{seed}",
        "-p", "alpha=0.1,1,5", "-p", "seed=1,2", "--", "python3", "nb.py", "{alpha}", "{seed}",
        cwd=repo,
    )  # fmt: skip
    assert res.code == 0, res.err
    return repo


def test_picked_then_declared_objective_drives_every_answer(orbit: Orbit, nb: Path) -> None:
    # Nothing declared: test_acc is picked (the counter logged first is passed over).
    best = orbit("best", "-g", "nb", "--by-params")
    assert best.code == 0, best.err
    first = best.out.splitlines()[0]
    assert first.startswith("settings of group nb by the final test_acc, highest is better ")
    assert "best setting: alpha=1 (mean 0.915" in best.out
    digest = orbit("lessons", "-g", "nb")
    assert "## Best by final test_acc, highest is better (picked, direction by its name)" in (
        digest.out
    )
    assert "- best setting: alpha=1: mean 0.915" in digest.out
    assert "- not ranked by: step: an axis or a counter; train_docs: an axis or a counter" in (
        digest.out
    )

    # Declared later: dev_nll, lower by its name. Every answer follows, and says so.
    declared = orbit("group", "objective", "nb", "dev_nll")
    assert declared.code == 0, declared.err
    assert declared.out == "group nb: dev_nll, lowest is better (declared for group nb)\n"
    saved = (group_dir(Home(orbit.home), "nb") / GROUP_FILE).read_text()
    assert "metric: dev_nll" in saved and "direction: min" in saved
    ranked = orbit("best", "-g", "nb", "--by-params", "--json").json()
    assert ranked["objective"]["why"] == "declared for group nb"
    assert ranked["settings"][0]["params"] == {"alpha": "5"} and ranked["maximize"] is False
    one = orbit("best", "-g", "nb")
    assert one.out.startswith("ranked by dev_nll, lowest is better (declared for group nb)\n")
    digest = orbit("lessons", "-g", "nb", "--json").json()
    assert digest["metric"] == "dev_nll" and digest["maximize"] is False
    assert digest["groups"][0]["objective"]["metric"] == "dev_nll"
    assert digest["settings"][0]["params"] == {"alpha": "5"}
    compared = orbit("compare", "-g", "nb")
    assert compared.out.startswith("objective: dev_nll, lowest is better (declared for group nb)\n")
    cmp = orbit("compare", "-g", "nb", "--json").json()
    assert cmp["metrics"][0] == {"name": "dev_nll", "goal": "min", "why": "declared for group nb"}
    listed = orbit("ps", "-a", "-g", "nb", "--sort", "best", "--json")
    assert listed.code == 0, listed.err
    names = [r["name"] for r in listed.json()["runs"]]
    assert names[:2] == ["a5-s1", "a5-s2"] and names[-2:] == ["a0.1-s1", "a0.1-s2"]
    text = orbit("ps", "-a", "-g", "nb", "--sort", "test_acc")
    way = "highest is better (given, direction by its name)"
    assert text.err == f"orbit: sorted best first by test_acc, {way}\n"
    rows = [line.split()[1] for line in text.out.splitlines()[1:]]
    assert rows[:2] == ["a1-s2", "a1-s1"]

    # A direction against the name is declared, with one warning line.
    perverse = orbit("group", "objective", "nb", "test_acc:min")
    assert perverse.code == 0
    assert "test_acc:min goes against its name (highest is better by the name)" in perverse.out
    low = orbit("best", "-g", "nb", "--by-params", "--json")
    assert low.json()["settings"][0]["params"] == {"alpha": "0.1"}
    assert "goes against its name" in low.err and len(low.err.splitlines()) == 1

    # Cleared: picked again.
    assert orbit("group", "objective", "nb", "--clear").code == 0
    assert orbit("best", "-g", "nb", "--json").json()["objective"]["metric_why"] == "picked"


def test_objective_bad_input_is_one_line(orbit: Orbit, nb: Path, python_image: str) -> None:
    cases = [
        (("run", "--objective", "acc", "--image", python_image, "--", "true"), ExitCode.USAGE,
         "orbit: --objective is a group's: give -g GROUP too"),
        (("group", "objective", "nb", "train_docs"), ExitCode.USAGE,
         "orbit: --objective train_docs: its name does not say which way is better: "
         "train_docs:max or train_docs:min"),
        (("group", "objective", "nb", "acc:best"), ExitCode.USAGE,
         "orbit: --objective 'acc:best': give METRIC, METRIC:max or METRIC:min"),
        (("best", "-g", "nb", "--metric", "tset_acc"), ExitCode.NOT_FOUND,
         "orbit: 'tset_acc' was logged by none of the 6 succeeded runs (they logged: step, "
         "train_docs, dev_acc, dev_nll, test_acc, test_nll)"),
        (("best", "-g", "nb", "--metric", "train_docs"), ExitCode.USAGE,
         "orbit: say which way is better for 'train_docs': train_docs:max or train_docs:min "
         "(its name does not say)"),
        (("best", "-g", "nb", "--metric", "acc:max", "--min"), ExitCode.USAGE,
         "orbit: --metric 'acc:max' and --min disagree: give the direction once"),
        (("ps", "-a", "--sort", "best"), ExitCode.USAGE,
         "orbit: --sort best ranks by a group's objective: give -g GROUP"),
        (("group", "show", "nope"), ExitCode.NOT_FOUND, "orbit: no runs in group 'nope'"),
    ]  # fmt: skip
    for args, code, line in cases:
        res = orbit(*args, cwd=nb)
        assert (res.code, res.err) == (code, line + "\n"), args
    assert not (group_dir(Home(orbit.home), "nb") / GROUP_FILE).exists()  # nothing declared


def test_a_group_that_logged_nothing_comparable(orbit: Orbit, busybox: str) -> None:
    script = 'for s in 1 2; do echo "{\\"step\\": $s, \\"samples\\": 64}"; done >> $ORBIT_METRICS'
    for n in ("x1", "x2"):
        orbit.submit("-w", "--no-project", "--image", busybox, "-g", "flat", "-n", n,
                     "--", "sh", "-c", script)  # fmt: skip
    best = orbit("best", "-g", "flat")
    assert best.code == ExitCode.NOT_FOUND
    assert best.err == (
        "orbit: not ranked: no logged metric qualifies as the objective (step: an axis or a "
        "counter; samples: an axis or a counter); declare one: orbit group objective flat "
        "METRIC:max|min\n"
    )
    digest = orbit("lessons", "-g", "flat")
    assert digest.code == 0, digest.err  # the rest of the digest is still an answer
    assert "## Best\n- not ranked: no logged metric qualifies as the objective" in digest.out


def test_damaged_group_file_is_named_and_ignored(orbit: Orbit, nb: Path) -> None:
    path = group_dir(Home(orbit.home), "nb") / GROUP_FILE
    path.write_text("format: 1\nobjective: [oops\n")
    best = orbit("best", "-g", "nb", "--json")
    assert best.code == 0 and best.json()["objective"]["metric"] == "test_acc"
    assert best.err.startswith(f"orbit: warning: {path}: not valid YAML")
    assert "declare it again with orbit group objective nb METRIC:max|min" in best.err
    digest = orbit("lessons", "-g", "nb")
    assert digest.code == 0 and "\nwarning: " in digest.out
    assert orbit("group", "objective", "nb", "dev_nll").code == 0  # declaring again repairs it
    assert orbit("best", "-g", "nb", "--json").json()["metric"] == "dev_nll"


def test_sweep_declares_and_like_extends_it(
    orbit: Orbit, python_image: str, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "nb", {"nb.py": NB})
    first = orbit(
        "sweep", "-w", "--json", "--image", python_image, "--cpus", "0.5", "--mem", "0.25",
        "--timeout", "5", "-g", "nb", "-n", "a{alpha}-s{seed}", "--objective", "test_acc",
        "-p", "alpha=0.1,1", "-p", "seed=1,2", "--", "python3", "nb.py", "{alpha}", "{seed}",
        cwd=repo,
    )  # fmt: skip
    assert first.code == 0, first.err
    shown = orbit("group", "show", "nb")
    assert shown.code == 0, shown.err
    assert "objective: test_acc, highest is better (declared for group nb)" in shown.out
    assert "- extend it: orbit sweep --like nb -p alpha=…" in shown.out
    whole = (
        f"orbit sweep --image {python_image} --cpus 0.5 --mem 0.25 --name 'a{{alpha}}-s{{seed}}'"
    )
    assert whole in shown.out.replace("\n  ", " ")

    # From anywhere: the same image, resources, name template, command and code.
    more = orbit("sweep", "--like", "nb", "-p", "alpha=5", "-w", "--json", cwd=tmp_path)
    assert more.code == 0, more.err
    runs = more.json()["runs"]
    assert [r["name"] for r in runs] == ["a5-s1", "a5-s2"]
    spec = json.loads(orbit("show", runs[0]["id"], "--json").out)
    assert spec["image"] == python_image
    assert spec["resources"]["cpus"] == 0.5 and spec["resources"]["mem_gb"] == 0.25
    assert spec["command"] == ["python3", "nb.py", "5", "1"]
    assert spec["group"] == "nb" and spec["timeout_min"] == 5
    best = orbit("best", "-g", "nb", "--by-params", "--json").json()
    assert [s["params"]["alpha"] for s in best["settings"]] == ["1", "5", "0.1"]
    digest = orbit("lessons", "-g", "nb")
    to_go_on = digest.out.split("## To go on (group nb)\n")[1].split("\n\n")[0]
    assert "- newest launch " in to_go_on and "sweep of 2 runs (2 launches in all)" in to_go_on
    assert f"- image {python_image}; cpus 0.5; mem 0.25 GiB; timeout 5 min" in to_go_on
    assert "- command: python3 nb.py '{alpha}' '{seed}'" in to_go_on
    assert "- params: alpha=5; seed=1,2" in to_go_on
    assert "- extend it: orbit sweep --like nb -p alpha=…" in to_go_on

    # Bad input: no launch to repeat, a gone project.
    none = orbit("sweep", "--like", "other", "-p", "alpha=1")
    assert (none.code, none.err) == (
        ExitCode.NOT_FOUND,
        "orbit: group 'other' has no recorded launch to repeat (groups launched before Orbit "
        "recorded launches: give the options again)\n",
    )
