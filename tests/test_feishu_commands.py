"""The Feishu bot's answers (orbit/feishu/commands.py): /gpu, /runs, /show and /help as cards,
from real run directories written by the store (no Docker) and the NVML stand-in's GPUs."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import STAND_IN_UUID, Orbit, gpu, stand_in, write_gpus
from standins.feishu import StandinFeishu

from orbit.feishu.commands import RUNS_MAX, answer
from orbit.notify.lark import CARD_BYTES, Lark, card_bytes
from orbit.store.files import append_jsonl
from orbit.store.home import Home
from orbit.store.model import METRICS, Run, RunState
from orbit.store.runs import RunStore


def make(
    store: RunStore,
    name: str | None,
    state: RunState = RunState.SUCCEEDED,
    reason: str = "exit code 0",
    *,
    user: str = "alice",
    command: tuple[str, ...] = ("python", "train.py"),
    **status: Any,
) -> Run:
    spec: dict[str, Any] = {
        "image": "orbit-test/busybox:1",
        "command": list(command),
        "resources": {"cpus": 1.0, "mem_gb": 1.0, "gpus": 0},
        "submitted_by": {"user": user, "pid": 1},
    }
    if name:
        spec["name"] = name
    return store.create(spec, state=state, reason=reason, actor="test", status_fields=status)


def text_of(card: dict[str, Any]) -> str:
    """Every text of a card, one string."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("content"), str):
                out.append(node["content"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(card)
    return "\n".join(out)


def is_card(card: dict[str, Any]) -> bool:
    """A card JSON 1.0 as Feishu takes it: a plain_text header title, a list of elements, each
    with a tag; it serialises (json.dumps) and is within the size limit."""
    json.dumps(card, ensure_ascii=False)
    header = card["header"]
    assert header["title"]["tag"] == "plain_text" and header["title"]["content"]
    assert card["elements"] and all(isinstance(e.get("tag"), str) for e in card["elements"])
    return card_bytes(card) <= CARD_BYTES


@pytest.fixture
def home(orbit: Orbit) -> Home:
    return Home.from_environ(orbit.environ)


def test_gpu_names_each_gpu_its_holder_and_the_queue(
    orbit: Orbit, tmp_path: Path, home: Home
) -> None:
    fake = write_gpus(tmp_path / "gpus.yaml", [gpu(0, used_gb=3.5, utilization=40), gpu(1)])
    orbit.environ["ORBIT_FAKE_GPUS"] = str(fake)
    orbit.configure(count_outside_use=False)
    home = Home.from_environ(orbit.environ)
    store = RunStore(home)
    lease = {"cpus": 1.0, "mem_gb": 1.0, "gpus": [{"index": 0, "uuid": STAND_IN_UUID.format(0)}]}
    holder = make(
        store,
        "trainer",
        RunState.RUNNING,
        "running",
        user="bob",
        lease=lease,
        started_at="2026-01-01T00:00:00+00:00",
    )
    (home.active_dir / holder.id).touch()
    waiting = [make(store, f"wait{i}", RunState.QUEUED, "waiting for a GPU") for i in range(13)]

    card = answer(home, "/gpu")
    assert is_card(card)
    text = text_of(card)
    assert f"leased to run {holder.id} (trainer), by bob" in text, text
    assert "0  A100 (stand-in)  3.5/80.0 GiB used, 40% busy  leased to run" in text
    assert "1  A100 (stand-in)  0.0/80.0 GiB used  free" in text and "1 free" in text
    assert "CPUs: 1 of" in text and "Memory: 1 of" in text
    assert f"{waiting[0].id} (wait0)  waiting for a GPU" in text
    assert "… and 3 more" in text and "Queue (13)" in text  # the first 10 of 13
    # Forgiving: case, a full-width slash, spaces, a mention left in.
    for typed in ("/GPU", "／gpu", "  /gpu  ", "gpu", "@_user_1 /gpu", "\u3000/Gpu"):
        assert f"leased to run {holder.id}" in text_of(answer(home, typed)), typed


def test_runs_lists_the_newest_first_with_a_metric(home: Home) -> None:
    store = RunStore(home)
    first = make(store, "first")
    append_jsonl(first.dir / METRICS, {"step": 1, "loss": 0.25})
    second = make(store, None, RunState.FAILED, "exit code 3", command=("sh", "-c", "exit 3"))
    third = make(store, "third", RunState.QUEUED, "waiting for CPUs")

    card = answer(home, "/runs")
    assert is_card(card)
    text = text_of(card)
    lines = [
        line for line in text.splitlines() if line.split("  ")[0] in (first.id, second.id, third.id)
    ]
    assert [line.split("  ")[0] for line in lines] == [third.id, second.id, first.id], text
    assert "loss 0.25" in lines[2] and "first" in lines[2] and "ago" in lines[2]
    assert "sh -c exit 3" in lines[1] and "exit code 3" in lines[1]  # no name: its command
    assert "Recent runs (3 of 3)" in text

    two = text_of(answer(home, "/runs 2"))
    assert "third" in two and "first" not in two and "… and 1 older" in two
    assert "usage: /runs [N]" in text_of(answer(home, "/runs many"))
    assert "usage: /runs [N]" in text_of(answer(home, "/runs 0"))


def test_runs_survives_a_corrupt_run_directory(home: Home) -> None:
    store = RunStore(home)
    good = make(store, "good")
    bad = make(store, "bad")
    (bad.dir / "status.yaml").write_text("state: [unclosed\n")
    gone = make(store, "gone")
    (gone.dir / "run.yaml").unlink()
    (home.runs_dir / "77").write_text("a stray file, no run directory")
    text = text_of(answer(home, "/runs"))
    assert f"{good.id}  succeeded  good" in text, text
    assert f"{bad.id}  unreadable" in text and "not valid YAML" in text
    assert f"\n{gone.id}  succeeded  gone" in text  # its index row, as `orbit ps -a` lists it
    assert "77  unreadable" in text and "not a run directory" in text
    # /show of it is its one line, never a traceback.
    shown = answer(home, f"/show {bad.id}")
    assert is_card(shown) and "status.yaml" in text_of(shown)


def test_show_answers_with_the_run_card(home: Home) -> None:
    store = RunStore(home)
    failed = make(
        store,
        "broken-train",
        RunState.FAILED,
        "exit code 1",
        exit_code=1,
        error_excerpt="Traceback (most recent call last):\nValueError: bad lr",
    )
    append_jsonl(failed.dir / METRICS, {"step": 3, "loss": 1.5})
    (failed.dir / "log.txt").write_text(
        "step 3\nTraceback (most recent call last):\nValueError: bad lr\n"
    )
    make(store, "other")

    card = answer(home, f"/show {failed.id}", web_url="http://gpu1:7777/")
    assert is_card(card)
    text = text_of(card)
    assert card["header"]["template"] == "red"
    assert "exit code 1" in text and "ValueError: bad lr" in text and "loss: 1.5" in text
    assert f'"http://gpu1:7777/runs/{failed.id}"' in json.dumps(card)
    # The CLI's resolution: a unique name prefix; no link without web_url.
    by_name = answer(home, "/show broken")
    assert failed.id in text_of(by_name)
    assert "/runs/" not in json.dumps(by_name)


def test_show_of_an_unknown_ambiguous_or_missing_id_is_one_clear_line(home: Home) -> None:
    store = RunStore(home)
    for i in range(11):  # ids 1 … 11: "1" is an id, but "no run 'zz'"; a prefix of 10, 11 …
        make(store, f"r{i}")
    unknown = text_of(answer(home, "/show zz"))
    assert "no run 'zz' (see `orbit ps -a`)" in unknown
    ambiguous = text_of(answer(home, "/show r"))
    assert "'r' is ambiguous: it matches runs" in ambiguous, ambiguous
    assert "usage: /show ID" in text_of(answer(home, "/show"))
    for card in (answer(home, "/show zz"), answer(home, "/show r"), answer(home, "/show")):
        assert is_card(card) and len(card["elements"]) == 1


def test_help_unknown_and_empty_list_the_commands(home: Home) -> None:
    for typed in ("", "   ", "/help", "/frobnicate", "hello there"):
        card = answer(home, typed)
        assert is_card(card)
        text = text_of(card)
        assert "/gpu" in text and "/runs [N]" in text and "/show ID" in text, typed
    assert "unknown command /frobnicate" in text_of(answer(home, "/frobnicate"))


def test_answers_stay_under_the_card_size_limit(home: Home) -> None:
    store = RunStore(home)
    for i in range(40):
        make(store, f"n{i}-" + "长名" * 3000)  # 6,000 characters, 18 KB of UTF-8 each
    card = answer(home, "/runs 100")
    assert is_card(card), card_bytes(card)
    text = text_of(card)
    assert f"(at most {RUNS_MAX} are listed)" in text and "… and 10 older" in text
    assert text.count("…") >= RUNS_MAX  # each long name says it was cut
    big = make(
        store,
        "big",
        RunState.FAILED,
        "exit code 1",
        error_excerpt="\n".join("错" * 400 for _ in range(100)),
    )
    shown = answer(home, f"/show {big.id}")
    assert is_card(shown), card_bytes(shown)


def test_feishu_takes_every_answer(home: Home) -> None:
    """Each answer sent as an interactive message by Orbit's client to the stand-in Feishu,
    which refuses content over 30 KB or a card without elements as Feishu does."""
    store = RunStore(home)
    for i in range(35):
        make(store, f"n{i}-" + "名" * 4000, RunState.FAILED, "exit code 1" + " why" * 500)
    with StandinFeishu() as fs:
        app_id, secret = fs.add_app()
        fs.add_user("ou_reader", "Reader")
        lark = Lark(fs.base, app_id, secret)
        for typed in ("/gpu", "/runs 30", "/show 3", "/show nope", "/help", ""):
            sent = lark.send("ou_reader", "interactive", answer(home, typed, web_url="http://h:1"))
            assert sent["msg_type"] == "interactive", typed


def test_timing_of_runs_and_gpu_on_a_home_of_2000_runs(
    orbit: Orbit, tmp_path: Path, home: Home
) -> None:
    """Not a bound, a measurement (printed with -s): /runs cold (no index.jsonl), warm, /gpu."""
    store = RunStore(home)
    make(store, "seed")
    seed = store.run_dir("1")
    for i in range(2, 2001):  # hard-linked copies of one run directory: 2,000 runs quickly
        shutil.copytree(seed, store.run_dir(str(i)), copy_function=os.link)
    home.index_path.unlink(missing_ok=True)
    t0 = time.perf_counter()
    cold = answer(home, "/runs")
    t1 = time.perf_counter()
    warm = answer(home, "/runs")
    t2 = time.perf_counter()
    stand_in(orbit, tmp_path, 8)
    gpus = answer(Home.from_environ(orbit.environ), "/gpu")
    t3 = time.perf_counter()
    ids = [[line.split("  ")[0] for line in text_of(c).splitlines()] for c in (cold, warm)]
    assert "Recent runs (10 of 2000)" in text_of(cold) and ids[0] == ids[1]
    assert ids[0][1:11] == [str(i) for i in range(2000, 1990, -1)]
    assert is_card(gpus)
    print(f"\n/runs cold {t1 - t0:.3f} s, warm {t2 - t1:.3f} s; /gpu {t3 - t2:.3f} s")
