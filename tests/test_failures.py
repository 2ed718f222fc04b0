"""Why a run failed: the error excerpt recorded when it settles, failure signatures, `orbit
failures` and `orbit logs --lines`.

The end-to-end test makes real failures in orbit/python:local: a learning-rate sweep whose
lr=50 runs overflow in `sigmoid` (at different steps, and from a module written at a different
path and line per seed), two runs missing two different config keys, a run killed for memory,
one that times out and a shell command that does not exist.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SMALL, Orbit
from web_client import browser_fetch, browser_json

from orbit.errors import ExitCode
from orbit.human import fmt_gib
from orbit.review.signatures import failures, normalise, run_signature, signature
from orbit.store.excerpt import MAX_CHARS, MAX_LINES, excerpt, key_line, log_excerpt
from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore

# No braces: sweep replaces {KEY} in the command. The module's line numbers and path depend on
# the seed, and so does the step at which exp() overflows for lr=50.
TRAIN = """
import json, math, os, sys
lr = float(sys.argv[1]); seed = int(sys.argv[2])
d = '/tmp/model-%d' % seed
os.makedirs(d)
src = chr(10) * (seed * 3) + 'import math' + chr(10) + 'def sigmoid(z):' + chr(10)
src += '    return 1 / (1 + math.exp(-z))' + chr(10)
open(d + '/model.py', 'w').write(src)
sys.path.insert(0, d)
from model import sigmoid
out = open(os.environ['ORBIT_METRICS'], 'a')
for step in range(1, 11):
    p = sigmoid(-lr * step * (seed * seed + 3))
    out.write(json.dumps(dict(step=step, loss=1 - p)) + chr(10))
    out.flush()
    print('step', step, 'p', p, flush=True)
print('done')
"""
OVERFLOW = "OverflowError: math range error"
OVERFLOW_SIG = "OverflowError: math range error (model.py, in sigmoid)"


def _run(orbit: Orbit, *args: str) -> str:
    res = orbit("run", "--json", "-g", "fx", *args)
    assert res.code == 0, res.err
    return str(res.json()["id"])


@pytest.fixture(scope="module")
def failed_home(tmp_path_factory: pytest.TempPathFactory, docker_engine: None) -> Any:
    """One home with the sweep and the other failures, all settled."""
    from conftest import _cleanup_containers, stop_ticker
    from docker_setup import BUSYBOX_IMAGE, PYTHON_IMAGE

    root = tmp_path_factory.mktemp("failures")
    (root / "work").mkdir()
    orbit = Orbit(root / "home", root / "work")
    py = ("--image", PYTHON_IMAGE, "--no-project", "--cpus", "0.5", "--mem", "0.25")
    sh = ("--image", BUSYBOX_IMAGE, *SMALL)
    params = ("-p", "lr=0.1,1,50", "-p", "seed=1,2,3")
    command = ("--", "python3", "-c", TRAIN, "{lr}", "{seed}")
    res = orbit("sweep", *py, "-g", "fx", "-n", "lr{lr}-s{seed}", *params, "--json", *command)
    assert res.code == 0, res.err
    sweep_ids = [str(r["id"]) for r in res.json()["runs"]]
    hog = "print('allocating', flush=True)\nx = bytearray(10**9)"
    ids = {
        "warmup": _run(orbit, *py, "--", "python3", "-c", "cfg = dict(lr=1)\ncfg['warmup']"),
        "decay": _run(orbit, *py, "--", "python3", "-c", "cfg = dict(lr=1)\ncfg['decay']"),
        "oom": _run(orbit, *py[:-1], "0.1", "--", "python3", "-c", hog),
        "timeout": _run(orbit, *sh, "--timeout", "0.02", "--", "sh", "-c", "echo begin; sleep 120"),
        "shell": _run(orbit, *sh, "--", "sh", "-c", "echo hi; nosuchcmd --x"),
    }
    waited = orbit("wait", "-g", "fx", "--json")
    assert waited.code == ExitCode.RUN_FAILED, waited.err
    try:
        yield orbit, sweep_ids, ids, waited.json()
    finally:
        stop_ticker(orbit.home)
        _cleanup_containers(orbit.home)


def test_failed_runs_record_their_excerpt(failed_home: Any) -> None:
    orbit, sweep_ids, ids, _ = failed_home
    by_params = {}
    for run_id in sweep_ids:
        shown = orbit("show", "--json", run_id).json()
        by_params[(shown["params"]["lr"], shown["params"]["seed"])] = shown
    for (lr, seed), shown in by_params.items():
        status = orbit.status(shown["id"])
        if lr != "50":
            assert shown["state"] == "succeeded" and shown["error_excerpt"] is None
            assert "error_excerpt" not in status
            continue
        assert shown["state"] == "failed" and shown["reason"] == "exit code 1"
        text = status["error_excerpt"]  # recorded in status.yaml as the run settled
        assert shown["error_excerpt"] == text
        lines = text.split("\n")
        assert lines[-1] == OVERFLOW
        assert (
            lines[0] == f'  File "/tmp/model-{seed}/model.py", line {int(seed) * 3 + 3}, in sigmoid'
        )
        assert "math.exp(-z)" in lines[1] and "^" not in text
        assert len(lines) == 3  # the stdout line that landed after the traceback is left out
        assert len(lines) <= MAX_LINES and len(text) <= MAX_CHARS
    show_text = orbit("show", sweep_ids[-1]).out.splitlines()
    at = next(i for i, line in enumerate(show_text) if line.startswith("  state "))
    assert show_text[at] == "  state      failed: exit code 1"
    assert show_text[at + 1].startswith("  log ends   ") and "File" in show_text[at + 1]
    assert (
        show_text[at + 3] == f"             {OVERFLOW}" and show_text[at + 4] == "  group      fx"
    )

    oom = orbit.status(ids["oom"])
    assert oom["reason"] == "killed for memory (limit 0.1 GiB)"
    assert oom["error_excerpt"] == "allocating"
    timed_out = orbit.status(ids["timeout"])
    assert timed_out["reason"] == "timed out after 1.2 s" and timed_out["error_excerpt"] == "begin"
    shell = orbit.status(ids["shell"])
    assert shell["reason"] == "exit code 127 (command not found)"
    assert shell["error_excerpt"].split("\n")[-1] == "sh: nosuchcmd: not found"
    assert orbit.status(ids["warmup"])["error_excerpt"].endswith("KeyError: 'warmup'")


def test_wait_and_ps_carry_the_error(failed_home: Any) -> None:
    orbit, sweep_ids, ids, waited = failed_home
    runs = {r["id"]: r for r in waited["runs"]}
    assert all(r["error_excerpt"] is None for r in runs.values() if r["state"] == "succeeded")
    assert runs[sweep_ids[-1]]["error_excerpt"].endswith(OVERFLOW)
    assert runs[ids["decay"]]["error_excerpt"].endswith("KeyError: 'decay'")
    text = orbit("wait", ids["decay"], sweep_ids[0], ids["timeout"])
    assert text.code == ExitCode.RUN_FAILED
    assert text.out.splitlines() == [
        f"run {ids['decay']} failed: exit code 1",
        "  KeyError: 'decay'",
        f"run {sweep_ids[0]} (lr0.1-s1) succeeded",
        f"run {ids['timeout']} failed: timed out after 1.2 s",  # the reason is the cause
    ]
    rows = {r["id"]: r for r in orbit("ps", "-a", "--json").json()["runs"]}
    assert rows[sweep_ids[-1]]["error_line"] == OVERFLOW
    assert rows[ids["shell"]]["error_line"] == "sh: nosuchcmd: not found"
    assert rows[sweep_ids[0]]["error_line"] is None
    listed = orbit("ps", "-a").out
    assert f"exit code 1 — {OVERFLOW}" in listed
    assert "exit code 127 (command not found) — sh: nosuchcmd: not found" in listed
    # When Orbit ended the run, the reason says why: the log's last line is no cause.
    assert "killed for memory (limit 0.1 GiB)\n" in listed and "— allocating" not in listed


def test_failures_groups_by_cause(failed_home: Any) -> None:
    orbit, sweep_ids, ids, _ = failed_home
    res = orbit("failures", "-g", "fx", "--json")
    assert res.code == 0, res.err
    found = res.json()["failures"]
    by_sig = {f["signature"]: f for f in found}
    # Orbit's own ends are named with their real limit, peak and duration.
    oom_peak = fmt_gib(orbit.status(ids["oom"])["peaks"]["mem_bytes"])
    assert set(by_sig) == {
        OVERFLOW_SIG,
        "KeyError: 'warmup' (<string>, in <module>)",
        "KeyError: 'decay' (<string>, in <module>)",
        f"killed for memory at 0.1 GiB ×1 (peak {oom_peak})",
        "timed out after 1.2 s ×1",
        "sh: nosuchcmd: not found",
    }, list(by_sig)
    assert {f["cause"] for f in found} >= {"killed for memory", "timed out", OVERFLOW_SIG}
    # Nothing of these settings succeeded (the plain runs' settings are their commands).
    assert {f["outcome"]["status"] for f in found} == {"unresolved"}
    assert all(f["outcome"]["lines"] == [] for f in found)
    overflow = found[0]  # the most frequent first
    assert overflow["signature"] == OVERFLOW_SIG and overflow["count"] == 3
    assert overflow["shared_params"] == {"lr": "50"}
    assert overflow["run_ids"] == sweep_ids[-3:]
    assert overflow["excerpt"].endswith(OVERFLOW)
    assert overflow["first_seen"] <= overflow["last_seen"]
    assert by_sig["sh: nosuchcmd: not found"]["run_ids"] == [ids["shell"]]
    assert by_sig["sh: nosuchcmd: not found"]["shared_params"] == {}
    text = orbit("failures", "-g", "fx").out
    assert text.startswith(f"{OVERFLOW_SIG}\n  3 runs ({', '.join(sweep_ids[-3:])}), all lr=50\n")
    assert "→" not in text
    # Scope: nothing ended in the future; an unknown group is an error.
    assert orbit("failures", "--since", "2999-01-01", "--json").json() == {"failures": []}
    assert orbit("failures", "--since", "1h", "--json").json()["failures"][0]["count"] == 3
    assert orbit("failures", "--folder", "nowhere").out == "no failed runs under nowhere\n"
    missing = orbit("failures", "-g", "nope")
    assert missing.code == ExitCode.NOT_FOUND and missing.err == "orbit: no runs in group 'nope'\n"
    bad = orbit("failures", "--since", "yesterday")
    assert bad.code == ExitCode.USAGE and "expected a span like 2h" in bad.err


def test_logs_lines(failed_home: Any) -> None:
    orbit, sweep_ids, _, _ = failed_home
    run_id = sweep_ids[0]  # lr=0.1: ten step lines and "done"
    whole = (orbit.run_dir(run_id) / "log.txt").read_text()
    res = orbit("logs", run_id, "--lines", "3")
    assert res.code == 0 and res.out == "".join(whole.splitlines(keepends=True)[-3:])
    assert res.out.splitlines()[-1] == "done" and len(res.out.splitlines()) == 3
    assert orbit("logs", run_id, "-n", "0").out == ""
    assert orbit("logs", run_id, "-n", "1000").out == whole
    assert orbit("logs", run_id, "-n", "2", "--json").json()["log"].startswith("step 10 ")
    assert orbit("logs", run_id, "-n", "2", "-f").out.splitlines() == whole.splitlines()[-2:]
    both = orbit("logs", run_id, "-n", "2", "--tail", "5")
    assert both.code == ExitCode.USAGE and both.err.count("\n") == 1


def test_logs_lines_reads_backwards_over_blocks(orbit: Orbit) -> None:
    from orbit.cli import logs

    store = RunStore(Home(orbit.home))
    run = store.create({"command": ["true"]}, state=RunState.QUEUED, reason="x", actor="test")
    path = run.path("log.txt")
    lines = [f"line {i} " + "x" * (i % 50) for i in range(30_000)]  # ~1.5 MB, many blocks
    path.write_text("\n".join(lines))  # the last line has no newline: it still counts
    for n in (1, 2, 7, 1000, 29_999, 30_000, 40_000):
        offset = logs.start(path, None, n)
        got = path.read_bytes()[offset:].decode().split("\n")
        assert got == lines[-n:], n
    assert orbit("logs", run.id, "--lines", "2").out == "\n".join(lines[-2:])


# --- the excerpt and the signature on crafted logs ----------------------------------------------
def _tb(path: str, line: int, func: str, message: str, addr: str = "0x7f00aa") -> str:
    return (
        "step 1 loss 0.5\n"
        "Traceback (most recent call last):\n"
        f'  File "{path}/train.py", line 40, in <module>\n'
        "    main()\n"
        f'  File "{path}/train.py", line {line}, in {func}\n'
        "    return 1 / (1 + math.exp(-z))\n"
        "                    ^^^^^^^^^^^^\n"
        f"{message} (object at {addr})\n"
    )


def test_signature_ignores_numbers_lines_addresses_and_paths() -> None:
    a = excerpt(_tb("/runs/12/code", 10, "sigmoid", "OverflowError: range 1e308"))
    b = excerpt(_tb("/home/u/x", 97, "sigmoid", "OverflowError: range 3.5", "0x55d1c3e0"))
    assert a and b and a != b
    assert (
        signature(a)
        == signature(b)
        == ("OverflowError: range N (object at <addr>) (train.py, in sigmoid)")
    )
    uid = "run 3f2a9c1d-1111-2222-3333-444455556666 at 2026-11-30T17:01:02.123Z"
    assert normalise(f"E: {uid}") == normalise(f"E: {uid.replace('3f2a', '9b1c')}")
    assert normalise("E: /data/a/shard_3.npy") == normalise("E: /mnt/b/shard_12.npy")


def test_signature_tells_causes_apart() -> None:
    base = _tb("/c", 10, "sigmoid", "OverflowError: math range error")
    different = [
        _tb("/c", 10, "sigmoid", "ZeroDivisionError: math range error"),  # the type
        _tb("/c", 10, "sigmoid", "OverflowError: int too large"),  # the message's words
        _tb("/c", 10, "softmax", "OverflowError: math range error"),  # where
        _tb("/c", 10, "sigmoid", "KeyError: 'lr'"),
        _tb("/c", 10, "sigmoid", "KeyError: 'seed'"),  # which key
    ]
    sigs = {signature(excerpt(t) or "") for t in [base, *different]}
    assert len(sigs) == 6, sigs
    # A long quoted value (a message, a path) is not a cause of its own.
    assert normalise("ValueError: bad 'a b c'") == normalise("ValueError: bad 'd e f'")


def test_excerpt_of_crafted_logs(tmp_path: Path) -> None:
    noisy = "\x1b[1mepoch 1\x1b[0m\n" + " 10%|#  |\r 50%|### |\r100%|####|\n"
    assert excerpt(noisy) == "epoch 1\n100%|####|"
    chained = (
        _tb("/c", 5, "load", "FileNotFoundError: no such file")
        + "\nDuring handling of the above exception, another exception occurred:\n\n"
        + _tb("/c", 9, "main", "RuntimeError: cannot load the data")
    )
    got = excerpt(chained) or ""
    assert key_line(got) == "RuntimeError: cannot load the data (object at 0x7f00aa)"
    assert "in main" in got and "load" not in got.replace("cannot load", "")
    lib = (
        "Traceback (most recent call last):\n"
        '  File "/code/train.py", line 7, in <module>\n'
        "    x = torch.ones(n, device='cuda')\n"
        '  File "/usr/lib/python3/site-packages/torch/cuda.py", line 88, in ones\n'
        "    return _alloc(n)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0)\n"
    )
    got = excerpt(lib) or ""
    assert got.split("\n")[0] == '  File "/code/train.py", line 7, in <module>'  # own code too
    assert key_line(got) == got.split("\n")[-1] and "CUDA out of memory" in got
    assert excerpt(_tb("/c", 5, "f", "ValueError: x") + "step 9\n").endswith(
        "ValueError: x (object at 0x7f00aa)"
    )
    assert key_line(excerpt("ok\nSegmentation fault (core dumped)\nexit\n")) == (
        "Segmentation fault (core dumped)"
    )
    # stdout and stderr reach the log through two pipes: a line printed before the error
    # can land amid the traceback's frames; the innermost frame is still the one shown.
    interleaved = (
        "Traceback (most recent call last):\n"
        '  File "<string>", line 13, in <module>\n'
        "step 3 p 0.25\n"
        '  File "/tmp/model-2/model.py", line 9, in sigmoid\n'
        "    return 1 / (1 + math.exp(-z))\n"
        "OverflowError: math range error\n"
    )
    assert excerpt(interleaved) == (
        '  File "/tmp/model-2/model.py", line 9, in sigmoid\n'
        "    return 1 / (1 + math.exp(-z))\n"
        "OverflowError: math range error"
    )
    # Or between a frame and its source line (seen under load): the source line still counts.
    split = (
        "Traceback (most recent call last):\n"
        '  File "<string>", line 13, in <module>\n'
        '  File "/tmp/model-2/model.py", line 9, in sigmoid\n'
        "step 1 p 9.9e-153\n"
        "step 2 p 9.8e-305\n"
        "    return 1 / (1 + math.exp(-z))\n"
        "                    ^^^^^^^^^^^^\n"
        "OverflowError: math range error\n"
    )
    assert excerpt(split) == excerpt(interleaved)
    # A frame without a source line (a file gone) takes nothing from the next frame.
    sourceless = (
        'Traceback (most recent call last):\n  File "/gone.py", line 3, in f\nValueError: x\n'
    )
    assert excerpt(sourceless) == '  File "/gone.py", line 3, in f\nValueError: x'
    # A traceback long ago, then much more output: the end of the log says more.
    stale = _tb("/c", 5, "f", "ValueError: caught") + "".join(f"step {i}\n" for i in range(40))
    assert excerpt(stale) == "\n".join(f"step {i}" for i in range(35, 40))
    assert excerpt("") is None and excerpt("\n \n") is None
    huge = "x" * 5000 + "\n" + "\n".join(f"line {i} " + "y" * 300 for i in range(20))
    got = excerpt(huge) or ""
    assert len(got) <= MAX_CHARS and got.endswith("line 19 " + "y" * 300)
    # Only the tail of a big log is read; its first, cut line is left out.
    log = tmp_path / "log.txt"
    log.write_text("z" * 200_000 + "\nlast words\n")
    assert log_excerpt(log) == "last words"
    assert log_excerpt(tmp_path / "none.txt") is None


def test_failures_of_runs_settled_before_excerpts(orbit: Orbit) -> None:
    """An old failed run has no `error_excerpt`: show and failures compute it from its log,
    and its status.yaml is not rewritten."""
    store = RunStore(Home(orbit.home))
    olds = []
    for seed in (1, 2):
        run = store.create(
            {"command": ["python3"], "group": "old", "params": {"lr": "9", "seed": str(seed)}},
            state=RunState.FAILED,
            reason="exit code 1",
            actor="test",
            status_fields={"finished_at": f"2026-01-0{seed}T00:00:00.000+00:00"},
        )
        run.path("log.txt").write_text(_tb(f"/r{seed}", 10 + seed, "f", "ValueError: nan loss"))
        olds.append(run)
    ok = store.create(
        {"command": ["python3"], "group": "old", "params": {"lr": "1", "seed": "1"}},
        state=RunState.SUCCEEDED,
        reason="",
        actor="test",
    )
    before = olds[0].path("status.yaml").read_bytes()
    shown = orbit("show", "--json", olds[0].id).json()
    assert shown["error_excerpt"].endswith("ValueError: nan loss (object at 0x7f00aa)")
    assert olds[0].path("status.yaml").read_bytes() == before
    got = failures([store.load(r.id) for r in (*olds, ok)])
    assert [(f.count, f.shared_params, f.first_seen[:10], f.last_seen[:10]) for f in got] == [
        (2, {"lr": "9"}, "2026-01-01", "2026-01-02")
    ]
    assert got[0].example_id == olds[1].id
    # The CLI takes the other runs' params from the listing index: it reads only the failed
    # runs' directories (a run.yaml broken after listing goes unnoticed, its row is fresh).
    assert orbit("ps", "-a").code == 0
    ok.path("run.yaml").write_text("{broken")
    data = json.loads(orbit("failures", "--json").out)
    assert [f["run_ids"] for f in data["failures"]] == [[olds[0].id, olds[1].id]]
    assert data["failures"][0]["shared_params"] == {"lr": "9"}
    assert run_signature("timed out after 3 min", None) == "timed out (no output)"
    assert run_signature("image not found: foo:1", None) == "image not found: foo:N (no output)"


@pytest.mark.chromium
def test_failures_page_in_chromium(failed_home: Any) -> None:
    """The web's failures page (and its API) on the real failures, in headless Chromium,
    with no console error or failed request; the runs page links to it."""
    pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    from playwright.sync_api import sync_playwright
    from test_web_e2e import CHROMIUM, CHROMIUM_ARGS, NEEDS_CHROMIUM
    from test_web_usability import _free_port, _watch

    if NEEDS_CHROMIUM.args[0]:
        pytest.skip(NEEDS_CHROMIUM.kwargs["reason"])
    orbit, sweep_ids, _, _ = failed_home
    res = orbit("web", "--port", str(_free_port()), "--json")
    assert res.code == 0, res.err
    url = str(res.json()["url"])
    base = url.split("/login", 1)[0]
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_context().new_page()
            page.set_default_timeout(10_000)
            seen = _watch(page)
            page.goto(url)
            page.click("header nav a[href='/failures']")
            page.wait_for_url("**/failures")
            page.goto(f"{base}/failures?group=fx")
            page.wait_for_load_state("networkidle")
            sections = page.locator("section.failure")
            assert sections.count() == 6
            first = sections.first
            assert first.locator("code.signature").inner_text() == OVERFLOW_SIG
            assert "3 runs" in first.inner_text() and "all lr=50" in first.inner_text()
            assert first.locator("pre").inner_text().splitlines()[-1] == OVERFLOW
            first.locator(f"a[href='/runs/{sweep_ids[-1]}']").first.click()
            page.wait_for_url(f"**/runs/{sweep_ids[-1]}")
            box = page.locator("#run-error pre").inner_text().splitlines()
            assert box[-1] == OVERFLOW and len(box) == 3
            api = browser_json(page, f"{base}/api/failures?group=fx")
            assert [f["count"] for f in api["failures"]] == [3, 1, 1, 1, 1, 1]
            assert browser_fetch(page, f"{base}/api/failures?group=nope")[0] == 404
            page.goto(f"{base}/failures?group=fx&folder=nowhere")
            assert page.locator("#no-failures").is_visible()
            assert not seen, seen
            browser.close()
    finally:
        assert orbit("web", "--stop").code == 0


def test_a_lost_run_records_its_excerpt(orbit: Orbit, busybox: str) -> None:
    import subprocess
    import time

    from conftest import kill_shepherd

    run_id = orbit.submit(*SMALL, "--image", busybox, "--", "sh", "-c", "echo working; sleep 60")
    status = orbit.wait_for(run_id, lambda s: s["state"] == "running")
    log = orbit.run_dir(run_id) / "log.txt"
    deadline = time.monotonic() + 30
    while "working" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the log never got its line"
        time.sleep(0.1)
    kill_shepherd(orbit, run_id)
    subprocess.run(["docker", "rm", "-f", status["container"]], check=True, capture_output=True)
    orbit("scheduler", "tick")
    status = orbit.wait_for(run_id, lambda s: s["state"] != "running")
    assert status["state"] == "lost" and status["error_excerpt"] == "working"
    found = orbit("failures", "--json").json()["failures"]
    assert [(f["signature"], f["excerpt"]) for f in found] == [
        ("its container vanished with no exit record", "working")
    ]
