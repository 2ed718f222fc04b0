"""What run, group and digest messages say, built from real run directories.

Runs are written through orbit.store (RunStore.create and transition, as submit and the
shepherd do) with the metrics.jsonl and log.txt an experiment and its shepherd would leave:
no Docker, but every file read is a real one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from orbit.human import fmt_metric
from orbit.notify.message import Message, group_message, merge, run_message, sparkline
from orbit.review.series import read_metrics, read_tail
from orbit.store.groups import Declared
from orbit.store.home import Home
from orbit.store.model import Run, RunState
from orbit.store.runs import RunStore
from orbit.web.listing import FILTERS

WEB = "http://orbit.test:7777/"


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore(Home(tmp_path / "home"))


def finished(
    store: RunStore,
    state: RunState,
    *,
    name: str = "",
    group: str | None = None,
    metrics: list[dict[str, Any]] | str = "",
    log: str | bytes = "",
    reason: str | None = None,
    seconds: int = 3723,
) -> Run:
    """A run that went queued → starting → running → `state`, with its files written."""
    spec: dict[str, Any] = {"name": name, "command": ["python", "train.py"]}
    spec["resources"] = {"cpus": 2, "mem_gb": 4, "gpus": 1}
    if group:
        spec["group"] = group
    run = store.create(spec, reason="waiting for the scheduler", actor="test")
    lease = {"cpus": 2, "mem_gb": 4, "gpus": [{"index": 0, "uuid": "GPU-0"}]}
    store.transition(run.id, RunState.STARTING, actor="test", lease=lease)
    start = "2026-01-01T00:00:00.000+00:00"
    store.transition(run.id, RunState.RUNNING, actor="test", started_at=start)
    if isinstance(metrics, str):
        run.path("metrics.jsonl").write_text(metrics)
    else:
        run.path("metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    run.path("log.txt").write_bytes(log if isinstance(log, bytes) else log.encode())
    end = f"2026-01-01T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.000+00:00"
    code = 0 if state is RunState.SUCCEEDED else 1
    peaks = {"mem_bytes": 3 << 30, "cpu_cores": 1.5, "cpu_seconds": 4000, "gpu_mem_bytes": 5 << 30}
    return store.transition(
        run.id,
        state,
        actor="test",
        reason=reason or f"exit code {code}",
        exit_code=code,
        finished_at=end,
        peaks=peaks,
        lease=None,
    )


LOSS = [{"step": i, "loss": 2.0 / (i + 1), "acc": i / 200} for i in range(200)]


def test_failed_run_message_has_everything_a_person_needs(store: RunStore) -> None:
    log = (
        "".join(f"\x1b[32mepoch {i}\x1b[0m ok\n" for i in range(500))
        + "Traceback\nValueError: nan\n"
    )
    run = finished(store, RunState.FAILED, name="lr-0.1", group="sweep1", metrics=LOSS, log=log)
    m = run_message(run, WEB)
    assert m.key == f"run-{run.id}-failed" and m.event == "failed" and m.state == "failed"
    assert m.title == f"run {run.id} (lr-0.1) failed: exit code 1"
    fields = dict(m.fields)
    assert fields["state"] == "failed (exit code 1)"
    assert fields["duration"] == "1h02m"
    assert fields["group"] == "sweep1"
    assert fields["resources"] == "2 CPUs, 4 GiB, 1 GPU"
    assert fields["peaks"] == "mem 3.0 GiB, CPU 1.5 cores, GPU mem 5.0 GiB"
    assert fields["loss"] == "0.01" and fields["acc"] == "0.995"
    assert [k for k, _ in m.fields][-2:] == ["loss", "acc"]  # the main metric first
    spark = m.lines[0]
    assert spark.startswith("loss █") and "→ 0.01" in spark and "200 points" in spark
    bars = spark.split()[1]
    assert 5 <= len(bars) <= 20 and bars[-1] == "▁"
    assert m.code is not None
    lines = m.code.split("\n")
    assert len(lines) == 20 and lines[-2:] == ["Traceback", "ValueError: nan"]
    assert lines[0] == "epoch 482 ok"  # ANSI colours removed
    assert m.link == f"http://orbit.test:7777/runs/{run.id}"
    assert Message.from_json(json.loads(json.dumps(m.to_json()))) == m


def test_the_main_metric_can_be_named_and_log_lines_counted(store: RunStore) -> None:
    log = "\n".join(f"line {i}" for i in range(100))
    run = finished(store, RunState.FAILED, metrics=LOSS, log=log)
    m = run_message(run, None, log_lines=3, metric="acc")
    assert m.lines[0].startswith("acc ▁") and m.lines[0].split()[1][-1] == "█"
    assert [k for k, _ in m.fields][-2:] == ["acc", "loss"]
    assert m.code == "line 97\nline 98\nline 99"
    assert m.link is None


def test_succeeded_run_has_no_log_and_a_plain_title(store: RunStore) -> None:
    run = finished(store, RunState.SUCCEEDED, name="ok", metrics=LOSS, log="all good\n")
    m = run_message(run, WEB)
    assert (m.event, m.state, m.code) == ("succeeded", "succeeded", None)
    assert m.title == f"run {run.id} (ok) succeeded"
    assert dict(m.fields)["state"] == "succeeded (exit code 0)"


def test_a_run_whose_log_lacks_lines_says_so(store: RunStore) -> None:
    # Settled from an exit record as the shepherd writes it (a gap, Docker away a while).
    from orbit.store.exitrecord import finalize_from_exit, write_exit

    run = store.create({"name": "fk", "command": ["x"]}, reason="waiting", actor="test")
    store.transition(run.id, RunState.STARTING, actor="test", lease={"cpus": 1, "mem_gb": 1})
    store.transition(run.id, RunState.RUNNING, actor="test", started_at="2026-01-01T00:00:00Z")
    gap = {"gaps": 1, "lines_written": 5, "ranges": [{"after": None, "before": None}]}
    away = [{"from": "2026-01-01T00:00:05+00:00", "to": "2026-01-01T00:00:25+00:00"}]
    write_exit(run.dir, {"exit_code": 0, "log_incomplete": gap, "docker_unreachable": away})
    assert finalize_from_exit(store, run.id, actor="test")
    m = run_message(store.load(run.id), None)
    assert m.title == f"run {run.id} (fk) succeeded; log incomplete"
    note = dict(m.fields)["log"]
    assert note.startswith("log incomplete: 1 gap (Docker discarded output before it was copied)")
    assert "; Docker was not answering " in note and "may be missing" in note


def test_lost_and_cancelled_runs(store: RunStore) -> None:
    lost = finished(store, RunState.LOST, log="x\n", reason="the container vanished")
    assert run_message(lost, None).event == "failed" and run_message(lost, None).code == "x"
    cancelled = finished(store, RunState.CANCELLED, log="x\n", reason="cancelled by alice")
    m = run_message(cancelled, None)
    assert (m.event, m.code) == ("cancelled", None)
    assert m.title.endswith("cancelled: cancelled by alice")


def test_damaged_files_give_a_shorter_message_never_an_error(store: RunStore) -> None:
    bad = '{"loss": 1}\nnot json\n{"loss": "x"}\n[1,2]\n{"loss": NaN}\n{"loss": 0.5}\n{"loss": 0.2}'
    run = finished(store, RunState.FAILED, metrics=bad, log=b"\xff\xfe broken \xe6\x97\n")
    m = run_message(run, None)
    assert dict(m.fields)["loss"] == "0.2"  # the last line without its newline counts
    assert m.code is not None and "broken" in m.code
    empty = finished(store, RunState.FAILED)
    m = run_message(empty, None)
    assert m.lines == [] and m.code is None
    empty.path("metrics.jsonl").unlink()
    empty.path("log.txt").unlink()
    assert run_message(empty, None).title.endswith("failed: exit code 1")


def test_a_huge_log_is_read_from_its_tail_only(store: RunStore) -> None:
    run = finished(store, RunState.FAILED)
    with open(run.path("log.txt"), "w") as fh:
        for i in range(400_000):  # about 9 MB
            fh.write(f"progress line {i:08d}\n")
        fh.write("x" * 100_000 + "\nthe end\n")  # a line longer than the tail read
    started = time.monotonic()
    m = run_message(run, None, log_lines=5)
    assert time.monotonic() - started < 1.0
    assert m.code is not None
    lines = m.code.split("\n")
    assert lines[-1] == "the end" and len(lines) <= 5
    assert all(len(line) <= 501 for line in lines)  # no line beyond the cap
    run.path("log.txt").write_text("".join(f"L{i:04d}" + "x" * 995 + "\n" for i in range(100)))
    lines = (run_message(run, None, log_lines=100).code or "").split("\n")
    assert 50 < len(lines) < 70  # only the last 64 KiB were read
    assert all(line.startswith("L") for line in lines)  # not the cut line the read began in


def test_a_huge_metrics_file_is_summarised_from_its_tail(store: RunStore) -> None:
    run = finished(store, RunState.SUCCEEDED)
    with open(run.path("metrics.jsonl"), "w") as fh:
        for i in range(300_000):  # about 12 MB, beyond the 8 MiB read
            fh.write(json.dumps({"step": i, "loss": 1 / (i + 1), "note": "x" * 10}) + "\n")
    started = time.monotonic()
    m = run_message(run, None)
    assert time.monotonic() - started < 2.0
    assert dict(m.fields)["loss"] == fmt_metric(1 / 300_000)
    count = int(m.lines[0].split("last ")[1].split()[0])
    assert 100_000 < count < 300_000  # the tail's points, and it says so


def test_the_tail_reader_agrees_with_the_whole_file_reader(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": i, "a": (i * 7) % 13}) + "\n" for i in range(500)))
    whole, tail = read_metrics(path, max_points=20), read_tail(path, 1 << 20, max_points=20)
    assert tail.series == whole.series and tail.skipped_bytes == 0
    cut = read_tail(path, 1000, max_points=20)
    assert cut.skipped_bytes > path.stat().st_size - 1000
    assert cut.series["a"].last == whole.series["a"].last
    assert cut.series["a"].count == len(path.read_bytes()[cut.skipped_bytes :].splitlines())


def test_sparkline() -> None:
    assert sparkline([]) == ""
    assert sparkline([1, 1, 1]) == "▄▄▄"
    assert sparkline([0, 7]) == "▁█"
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"


def group_of(store: RunStore, n_failed: int = 2) -> list[Run]:
    runs = [
        finished(store, RunState.SUCCEEDED, name=f"s{acc}", group="g 1", metrics=[{"acc": acc}])
        for acc in (0.5, 0.9, 0.7)
    ]
    for i in range(n_failed):
        reason = "out of memory" if i % 2 else "exit code 1"
        runs.append(finished(store, RunState.FAILED, name=f"f{i}", group="g 1", reason=reason))
    return runs


def test_group_message_counts_best_and_failures(store: RunStore) -> None:
    runs = group_of(store)
    m = group_message("g 1", runs, WEB)
    assert m.event == "group" and m.state == "failed"
    assert m.title == "group g 1 finished: 5 runs, 3 succeeded, 2 failed"
    fields = dict(m.fields)
    assert fields["succeeded"] == "3" and fields["failed"] == "2"
    assert fields["best acc (highest, by its name)"] == f"0.9: run {runs[1].id} (s0.9)"
    low = dict(group_message("g 1", runs, WEB, direction="min").fields)
    assert low["best acc (lowest, given)"] == f"0.5: run {runs[0].id} (s0.5)"
    named = dict(group_message("g 1", runs, None, metric="acc").fields)
    assert "best acc (highest, given)" in named
    declared = Declared("acc", "min")
    told = dict(group_message("g 1", runs, None, declared=declared).fields)
    assert told["best acc (lowest, declared)"] == f"0.5: run {runs[0].id} (s0.5)"
    assert m.lines == [
        f"run {runs[3].id} (f0) failed: exit code 1",
        f"run {runs[4].id} (f1) failed: out of memory",
    ]
    link = urlsplit(m.link or "")
    assert link.path == "/" and parse_qs(link.query) == {"group": ["g 1"]}
    assert "group" in FILTERS  # the runs page filters on this parameter
    with pytest.raises(ValueError):
        group_message("g 1", runs, None, direction="best")


def test_group_key_is_stable_and_changes_with_outcomes(store: RunStore) -> None:
    runs = group_of(store)
    key = group_message("g 1", runs, None).key
    assert key.startswith("g 1".join(["group-", "-"]))
    assert group_message("g 1", list(reversed(runs)), None).key == key
    assert group_message("g 1", runs[:-1], None).key != key
    flipped = store.update(runs[0].id, lambda r: {"state": "failed"}, actor="test")
    assert group_message("g 1", [flipped, *runs[1:]], None).key != key


def test_group_names_at_most_ten_failures(store: RunStore) -> None:
    runs = group_of(store, n_failed=13)
    m = group_message("g 1", runs, None)
    assert len(m.lines) == 11 and m.lines[-1] == "… and 3 more failed"
    assert m.lines[0].startswith(f"run {runs[3].id} ")


def msg(i: int, state: str) -> Message:
    return Message(
        f"run-{i}-{state}",
        "succeeded" if state == "succeeded" else "failed",
        f"run {i} {state}",
        state,
    )


def test_merge_makes_one_digest_for_a_burst() -> None:
    burst = [
        msg(1, "succeeded"),
        msg(2, "failed"),
        msg(3, "succeeded"),
        msg(4, "succeeded"),
        msg(5, "failed"),
    ]
    d = merge(burst)
    assert d.event == "digest" and d.state == "failed"
    assert d.title == "5 runs finished: 3 succeeded, 2 failed"
    assert d.lines == [m.title for m in burst]
    assert d.key == merge(list(burst)).key and d.key != merge(burst[:4]).key
    again = merge([d, msg(6, "lost")])
    assert again.title == "6 runs finished: 3 succeeded, 1 lost, 2 failed"
    assert again.lines == [*d.lines, "run 6 lost"]
    assert Message.from_json(json.loads(json.dumps(again.to_json()))) == again
    with pytest.raises(ValueError):
        merge([])


def test_merge_bounds_its_lines_and_names_groups() -> None:
    many = [msg(i, "succeeded") for i in range(40)]
    group = Message("group-g-abc", "group", "group g finished: 2 runs, 2 succeeded", "succeeded")
    d = merge([*many, group])
    assert d.title == "41 notifications: 40 succeeded, 1 group finished"
    assert len(d.lines) == 31 and d.lines[-1] == "… and 11 more"
    assert merge([d]).lines == d.lines  # a digest merged alone says the same
