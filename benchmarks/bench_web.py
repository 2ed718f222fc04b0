#!/usr/bin/env python3
"""Server time of the web view's two heavy pages: the runs list over a large history, and the
page of one run whose metrics.jsonl has a million lines.

1. The runs page `/` with 10,000 finished runs in the store (target < 300 ms). The app is built
   in-process with `make_app(Home(...))` and GET / is timed as a plain WSGI call with the
   X-Orbit-Token header (N repeats after one warm-up); then the same through a real server
   (`orbit.py web --port P --json`, urllib GETs with the token as header and cookie, then
   `orbit web --stop`). `/api/runs?ids=<the 50 shown>`, which the page polls every 2.5 s, is
   timed beside it.

2. A run (RunStore.create, state running) whose metrics.jsonl has 1,000,000 lines
   {"step": i, "loss": …, "acc": …}, in its own temporary home. GET /runs/<id> is timed cold
   (the first request of a fresh server process: the metrics are parsed), warm (the parse is
   cached by file size), and after one appended line (what every refresh of a live run costs),
   with the page's size (target < 1 MB). The page's charts are drawn by uPlot from
   /api/series?ids=<id> (JSON); while the run is active its script asks every 5 s for the points
   after the last x it has (`&since=X`); /api/runs/<id>/metrics serves the series as JSON too:
   all are timed and sized.

When a figure misses its target the script prints a cProfile of one such request.

Standalone: `python benchmarks/bench_web.py [--runs N] [--repeats N] [--home DIR]`; no Docker.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import json
import math
import os
import pstats
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py, also under python -P

from common import (
    REPO,
    add_orbit_options,
    child_environ,
    copy_home,
    index_lines,
    machine,
    ms_header,
    ms_row,
    ratio_line,
    reused_copy,
    setup_lines,
)

LIST_TARGET_MS = 300.0
PAGE_TARGET_BYTES = 1_000_000
METRIC_LINES = 1_000_000
COLD_SERVERS = 3  # fresh servers whose first request is timed (the median is the figure)
sys.path.insert(0, str(REPO))

from orbit.review import series  # noqa: E402
from orbit.review.series import Follower  # noqa: E402
from orbit.review.sidecar import SIDECAR  # noqa: E402
from orbit.store.home import Home  # noqa: E402
from orbit.store.locks import try_lock  # noqa: E402
from orbit.store.model import RunState, now_iso  # noqa: E402
from orbit.store.runs import RunStore  # noqa: E402
from orbit.web.app import make_app  # noqa: E402
from orbit.web.context import load_or_create_token  # noqa: E402

WIDTH = 34


# --- requests --------------------------------------------------------------------------------
def wsgi_get(app: Any, path: str, token: str) -> tuple[str, bytes, float]:
    """GET `path` from the WSGI `app` in this process: status, body, seconds."""
    path_info, _, query = path.partition("?")
    environ: dict[str, Any] = {}
    setup_testing_defaults(environ)
    environ.update(
        REQUEST_METHOD="GET", PATH_INFO=path_info, QUERY_STRING=query, HTTP_X_ORBIT_TOKEN=token
    )
    status: list[str] = []

    def start_response(st: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        status.append(st)

    t0 = time.perf_counter()
    result = app(environ, start_response)
    try:
        body = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close:
            close()
    elapsed = time.perf_counter() - t0
    if not status or not status[0].startswith("200"):
        raise SystemExit(f"bench_web: GET {path} answered {status[:1]}: {body[:300]!r}")
    return status[0], body, elapsed


def http_get(base: str, path: str, token: str) -> tuple[bytes, float]:
    """GET `base+path` over HTTP with the token as cookie and header: body, seconds."""
    req = urllib.request.Request(
        base + path, headers={"X-Orbit-Token": token, "Cookie": f"orbit_token={token}"}
    )
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as resp:
        body = resp.read()
        code = resp.status
    elapsed = time.perf_counter() - t0
    if code != 200:
        raise SystemExit(f"bench_web: GET {path} over HTTP answered {code}")
    return body, elapsed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`orbit.py web --port P --json` against one home, stopped with `orbit web --stop`."""

    def __init__(self, orbit_py: Path, env: dict[str, str]) -> None:
        self.cmd = [sys.executable, str(orbit_py), "web"]
        self.env = env
        self.base = ""
        self.token = ""
        self.startup = 0.0

    def __enter__(self) -> Server:
        port = free_port()
        t0 = time.perf_counter()
        proc = subprocess.run(
            [*self.cmd, "--port", str(port), "--json"], env=self.env, capture_output=True
        )
        self.startup = time.perf_counter() - t0
        if proc.returncode:
            raise SystemExit(f"bench_web: orbit web failed:\n{proc.stderr.decode()}")
        info = json.loads(proc.stdout)
        self.base = str(info.get("base_url") or f"http://127.0.0.1:{info['port']}").rstrip("/")
        root = Path(self.env["ORBIT_HOME"])
        self.token = (root / "web-token").read_text().strip()
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run([*self.cmd, "--stop"], env=self.env, capture_output=True, check=False)


def profile(call: Callable[[], Any], lines: int = 18) -> str:
    """cProfile of one `call()`: the functions with the most own time, then by cumulative."""
    prof = cProfile.Profile()
    prof.enable()
    call()
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out).strip_dirs()
    stats.sort_stats("tottime").print_stats(lines)
    stats.sort_stats("cumulative").print_stats(lines)
    text = out.getvalue()
    # Drop pstats' preamble lines that name no function.
    keep = [ln for ln in text.splitlines() if ln.strip() and "Ordered by" not in ln]
    return "\n".join("    " + ln for ln in keep)


# --- homes -----------------------------------------------------------------------------------
def metrics_run(root: Path, n_lines: int) -> tuple[Home, str, int, float]:
    """A home with one running run whose metrics.jsonl has `n_lines` lines: the home, run id,
    file size and the seconds the file took to write."""
    import bench_ps  # the same spec as the listing's runs

    home = Home.from_environ({"ORBIT_HOME": str(root)})
    store = RunStore(home)
    spec = bench_ps.spec_for(1, random.Random(1))
    run = store.create(
        spec,
        state=RunState.RUNNING,
        reason="",
        actor="cli:4242",
        status_fields={"started_at": now_iso(), "lease": dict(spec["resources"])},
    )
    rng = random.Random(2)
    t0 = time.perf_counter()
    path = run.path("metrics.jsonl")
    with open(path, "w") as fh:
        block: list[str] = []
        for i in range(n_lines):
            loss = 2.5 * math.exp(-i / 200_000) + 0.05 * rng.random()
            acc = 1 - 0.9 * math.exp(-i / 150_000) - 0.02 * rng.random()
            block.append(f'{{"step": {i}, "loss": {loss:.6f}, "acc": {acc:.5f}}}\n')
            if len(block) == 10_000:
                fh.write("".join(block))
                block.clear()
        fh.write("".join(block))
    return home, run.id, path.stat().st_size, time.perf_counter() - t0


def finished_run(root: Path, lines: Iterator[str]) -> tuple[str, int]:
    """A succeeded run in the home at `root` whose metrics.jsonl holds `lines`: id and size."""
    spec = {"name": "metrics", "image": "busybox", "command": ["true"]}
    home = Home.from_environ({"ORBIT_HOME": str(root)})
    run = RunStore(home).create(spec, state=RunState.SUCCEEDED, reason="exit code 0", actor="b")
    path = run.path("metrics.jsonl")
    with open(path, "w") as fh:
        for block in iter(lambda: list(itertools.islice(lines, 10_000)), []):
            fh.write("".join(block))
    return run.id, path.stat().st_size


def cold_get(orbit_py: Path, env: dict[str, str], root: Path, path: str) -> float:
    """Seconds of the first GET `path` of a fresh `orbit web` server."""
    with Server(orbit_py, env) as srv:
        token = (root / "web-token").read_text().strip()
        return http_get(srv.base, path, token)[1]


def time_show(orbit_py: Path, env: dict[str, str], run_id: str | None, n: int) -> list[float]:
    """Seconds of `n` calls of `orbit.py show ID` (None: `python -c pass`)."""
    cmd = (
        [sys.executable, str(orbit_py), "show", run_id]
        if run_id
        else [sys.executable, "-c", "pass"]
    )
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        out.append(time.perf_counter() - t0)
    return out


def append_line(path: Path, step: int) -> None:
    with open(path, "a") as fh:
        fh.write(f'{{"step": {step}, "loss": 0.05, "acc": 0.99}}\n')


def kb(n: int) -> str:
    return f"{n / 1000:,.0f} KB"


# --- the two parts ---------------------------------------------------------------------------
def bench_listing(root: Path, env: dict[str, str], orbit_py: Path, repeats: int) -> float:
    """Part 1: GET / (and its poll) in-process and over HTTP; the in-process median in ms."""
    home = Home.from_environ({"ORBIT_HOME": str(root)})
    token = load_or_create_token(home)
    before = index_lines(home.index_path)
    t0 = time.perf_counter()
    app = make_app(home)
    build = time.perf_counter() - t0
    _, first, t_first = wsgi_get(app, "/", token)  # warm-up
    after = index_lines(home.index_path)
    page = first.decode()
    shown = [
        part.split('"', 1)[0] for part in page.split('href="/runs/')[1:] if '"' in part
    ]  # the ids the page links to, in order
    shown = list(dict.fromkeys(s for s in shown if "/" not in s))[:50]
    poll = "/api/runs?ids=" + ",".join(shown)
    wsgi_get(app, poll, token)

    paths = {"GET /": "/", "GET /?sort=name": "/?sort=name", "GET /?q=sweep-7": "/?q=sweep-7"}
    paths["GET /api/runs?ids=<50 shown>"] = poll
    for path in paths.values():
        wsgi_get(app, path, token)  # warm-up of each
    times: dict[str, list[float]] = {k: [] for k in paths}
    sizes: dict[str, int] = {}
    for _ in range(repeats):
        for name, path in paths.items():
            _, body, took = wsgi_get(app, path, token)
            times[name].append(took)
            sizes[name] = len(body)

    print(f"\n== runs page `/`, {len(os.listdir(home.runs_dir))} runs in the store ==")
    rebuilt = "fresh" if after == before else f"{after - before} rows appended by the first GET"
    print(f"index.jsonl: {before} lines before, {after} after ({rebuilt})")
    print(f"make_app: {build * 1000:.1f} ms; first GET / (warm-up): {t_first * 1000:.1f} ms")
    print(f"in-process WSGI, {repeats} repeats after one warm-up, alternated:")
    print(f"{ms_header(WIDTH)}{'size':>12}")
    for name, values in times.items():
        print(f"{ms_row(name, values, WIDTH)}{kb(sizes[name]):>12}")

    with Server(orbit_py, env) as srv:
        http_token = (root / "web-token").read_text().strip()
        http_paths = {"HTTP GET /": "/", "HTTP GET /api/runs?ids=<50>": poll}
        _, t_cold = http_get(srv.base, "/", http_token)
        for path in http_paths.values():
            http_get(srv.base, path, http_token)  # warm-up
        http_times: dict[str, list[float]] = {k: [] for k in http_paths}
        for _ in range(repeats):
            for name, path in http_paths.items():
                http_times[name].append(http_get(srv.base, path, http_token)[1])
    print(
        f"real server (`orbit web --port P --json`, started in {srv.startup * 1000:.0f} ms): "
        f"first GET / {t_cold * 1000:.1f} ms, then {repeats} repeats:"
    )
    for name, values in http_times.items():
        print(ms_row(name, values, WIDTH))

    median_ms = statistics.median(times["GET /"]) * 1000
    if median_ms >= LIST_TARGET_MS:
        print("\ncProfile of one in-process GET / (over target):")
        print(profile(lambda: wsgi_get(app, "/", token)))
    return median_ms


def bench_run_page(
    root: Path, pycache: Path | None, orbit_py: Path, repeats: int, n_lines: int
) -> tuple[float, float, int]:
    """Part 2: GET /runs/<id> of a run with `n_lines` metric lines: cold ms with the sidecar,
    cold ms without it, and page bytes."""
    home, run_id, size, wrote = metrics_run(root, n_lines)
    # Held like a live shepherd's, so `orbit show` finds the run healthy (no repairing tick).
    shepherd_lock = try_lock(home.runs_dir / run_id / "shepherd.lock")
    if shepherd_lock is None:
        raise SystemExit("bench_web: cannot hold the run's shepherd lock")
    env = child_environ(root, pycache)
    metrics = home.runs_dir / run_id / "metrics.jsonl"
    print(f"\n== run page, {n_lines:,} metric lines ==")
    print(f"run {run_id} (running): metrics.jsonl {size / 1e6:.1f} MB, written in {wrote:.1f} s")
    page_path = f"/runs/{run_id}"
    extra = {"GET /api/series?ids=<id>": f"/api/series?ids={run_id}"}
    extra["GET /api/runs/<id>/metrics"] = f"/api/runs/{run_id}/metrics"

    # Cold without a sidecar: the first request of a fresh server parses the whole file.
    colds = max(1, min(COLD_SERVERS, repeats))
    bare_http = [cold_get(orbit_py, env, root, page_path) for _ in range(colds)]
    t_bare_http = statistics.median(bare_http)
    show_bare = time_show(orbit_py, env, run_id, max(1, min(3, repeats)))

    # The sidecar as the shepherd leaves it: its last update reads the file to the end.
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    Follower(metrics).update(None)
    follow_s, follow_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    side = metrics.with_name(SIDECAR)

    # Cold with the sidecar: the first request of a fresh server process reads it.
    cold_http = [cold_get(orbit_py, env, root, page_path) for _ in range(colds - 1)]
    with Server(orbit_py, env) as srv:
        token = (root / "web-token").read_text().strip()
        page, took = http_get(srv.base, page_path, token)
        cold_http.append(took)
        t_cold_http = statistics.median(cold_http)
        warm_http = [http_get(srv.base, page_path, token)[1] for _ in range(repeats)]
        extra_http = {}
        for name, url in extra.items():
            body, took = http_get(srv.base, url, token)
            extra_http[name] = (len(body), took)
    show_side = time_show(orbit_py, env, run_id, repeats)
    baseline = time_show(orbit_py, env, None, repeats)

    token = load_or_create_token(home)
    app = make_app(home)
    _, body, t_cold = wsgi_get(app, page_path, token)
    warm = [wsgi_get(app, page_path, token)[2] for _ in range(repeats)]
    appended: list[float] = []
    step = n_lines
    for _ in range(max(3, repeats // 3)):
        append_line(metrics, step)
        step += 1
        appended.append(wsgi_get(app, page_path, token)[2])
    extra_times: dict[str, list[float]] = {}
    extra_sizes: dict[str, int] = {}
    for name, p in extra.items():
        wsgi_get(app, p, token)  # warm-up (the metrics endpoint parses for its own points)
        extra_times[name] = []
        for _ in range(repeats):
            _, b, took = wsgi_get(app, p, token)
            extra_times[name].append(took)
            extra_sizes[name] = len(b)
    append_line(metrics, step)
    live_poll = wsgi_get(app, f"/api/series?ids={run_id}&since={step - 1}", token)
    appended_charts, live_bytes = live_poll[2], len(live_poll[1])

    charts = page.count(b'<figure class="metric"')
    print(
        f"page: {len(page):,} bytes ({kb(len(page))}), {charts} charts, drawn by uPlot from "
        "/api/series (charts.js polls it with &since= every 5 s while the run is active)"
    )
    print(
        f"sidecar {SIDECAR}: {side.stat().st_size / 1000:,.0f} KB, written by the shepherd's "
        f"last update from nothing in {follow_s * 1000:.0f} ms ({follow_cpu:.2f} CPU-s)"
    )
    print(f"real server: first GET /runs/<id> of a fresh server (cold), {colds} servers each:")
    print(ms_header(WIDTH))
    print(ms_row("cold GET /runs/<id>, no sidecar", bare_http, WIDTH))
    print(ms_row("cold GET /runs/<id>, sidecar", cold_http, WIDTH))
    print(ms_row("HTTP GET /runs/<id> warm", warm_http, WIDTH))
    for name, (n, took) in extra_http.items():
        print(f"HTTP {name}: {took * 1000:.1f} ms, {kb(n)} (first request)")
    print(f"in-process WSGI: first GET (cold) {t_cold * 1000:.1f} ms, page {kb(len(body))}")
    print(f"{ms_header(WIDTH)}{'size':>12}")
    print(f"{ms_row('GET /runs/<id> warm (cached)', warm, WIDTH)}{kb(len(body)):>12}")
    print(f"{ms_row('GET /runs/<id> after +1 line', appended, WIDTH)}{kb(len(body)):>12}")
    for name, values in extra_times.items():
        print(f"{ms_row(name + ' warm', values, WIDTH)}{kb(extra_sizes[name]):>12}")
    print(
        f"GET /api/series?ids=<id>&since=X after +1 line (the live poll): "
        f"{appended_charts * 1000:.1f} ms, {live_bytes:,} bytes"
    )

    def cold_request() -> None:
        append_line(metrics, step + 1)
        wsgi_get(app, page_path, token)

    print("\ncProfile of one GET /runs/<id> after an appended line (a live run's refresh):")
    print(profile(cold_request))
    print(f"\n`orbit show {run_id}` (a process each; the run is active, so show saves no sidecar):")
    print(ms_header(WIDTH))
    print(ms_row("orbit show, no sidecar", show_bare, WIDTH))
    print(ms_row("orbit show, sidecar", show_side, WIDTH))
    print(ms_row("python -c pass", baseline, WIDTH))
    if t_cold_http * 1000 >= LIST_TARGET_MS:
        print("\ncProfile of one cold GET /runs/<id> with the sidecar (over target):")

        def cold_with_sidecar() -> None:
            series._cache.clear()
            wsgi_get(app, page_path, token)

        print(profile(cold_with_sidecar))
    return t_cold_http * 1000, t_bare_http * 1000, len(page)


def _history(args: argparse.Namespace, root: Path) -> None:
    if args.home:
        src = args.home.resolve()
        if not (src / "runs").is_dir() or not os.listdir(src / "runs"):
            raise SystemExit(f"bench_web: {src} holds no runs (fill it with bench_ps.py)")
        t0 = time.perf_counter()
        copy_home(src, root)
        took = time.perf_counter() - t0
        print(f"history: a copy of {src} ({len(os.listdir(root / 'runs'))} runs, {took:.1f} s)")
    else:
        import bench_ps

        home = Home.from_environ({"ORBIT_HOME": str(root)})
        print(f"history: {bench_ps.fill(home, args.runs)}")


def _metrics_cases(args: argparse.Namespace, scratch: Path, pycache: Path | None) -> list[str]:
    """Cases 3 and 4 (web_metrics.py) through `args.orbit`'s server: their last lines."""
    import web_metrics

    out = []
    root = scratch / "cases-home"
    env = child_environ(root, pycache)
    orbit_py = args.orbit.resolve()
    repeats = max(1, min(COLD_SERVERS, args.repeats))

    def make_run(lines: Iterator[str]) -> tuple[str, int]:
        return finished_run(root, lines)

    def get(base: str, path: str, token: str) -> tuple[bytes, float]:
        return http_get(base, path, token)

    if "cold" in args.parts:
        big, small = web_metrics.cold_wide(
            make_run, lambda: Server(orbit_py, env), get, repeats, args.wide_lines
        )
        out.append(
            f"cold run page, {args.wide_lines:,} lines x 20 keys, no sidecar: {big * 1000:.0f} ms "
            f"(target < {web_metrics.COLD_TARGET_MS:.0f} ms); baseline {small * 1000:.0f} ms "
            f"(ratio {big / small:.2f})"
        )
    if "keys" in args.parts:
        busy, idle = web_metrics.parallel_new_keys(
            make_run, lambda: Server(orbit_py, env), get, repeats
        )
        n, keys = web_metrics.PARALLEL, web_metrics.NEW_KEY_LINES
        out.append(
            f"/api/runs while {n} views of a {keys:,}-new-key run are read: at worst "
            f"{busy * 1000:.0f} ms; idle {idle * 1000:.0f} ms (ratio {busy / idle:.2f})"
        )
    return out


PARTS = ("list", "run", "cold", "keys")
TARGET_GROWTH = 1.5  # the runs page over 100,000 runs over the one over 10,000


def bench_growth(args: argparse.Namespace, sizes: list[int], scratch: Path) -> int:
    """GET / (the first page: PER_PAGE runs, whatever the history) in-process over the
    copies of two homes bench_ps.py filled, alternated; the larger over the smaller."""
    src = args.home.resolve()
    roots = {n: reused_copy(src / str(n), args.copies, scratch, "bench_web") for n in sizes}
    apps: dict[int, tuple[Any, str]] = {}
    for n, root in roots.items():
        home = Home.from_environ({"ORBIT_HOME": str(root)})
        app = make_app(home)
        token = load_or_create_token(home)
        before = index_lines(home.index_path)
        _, _, first = wsgi_get(app, "/", token)  # warm-up: the index parsed once
        after = index_lines(home.index_path)
        print(f"{n:,} runs: first GET / {first * 1000:.0f} ms, index.jsonl {before} lines "
              f"before, {after} after")  # fmt: skip
        apps[n] = (app, token)
    paths = {"GET /": "/", "GET /?q=sweep-7": "/?q=sweep-7"}
    times: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        for n, (app, token) in apps.items():
            for name, path in paths.items():
                times.setdefault(f"{name} {n}", []).append(wsgi_get(app, path, token)[2])
    print(f"in-process WSGI, {args.repeats} repeats after one warm-up, homes alternated:")
    print(ms_header(WIDTH))
    for name, values in times.items():
        print(ms_row(name, values, WIDTH))
    med = {k: statistics.median(v) for k, v in times.items()}
    big, small = sizes[-1], sizes[0]
    if med[f"GET / {big}"] / med[f"GET / {small}"] > TARGET_GROWTH:
        print(f"\ncProfile of one in-process GET / over {big:,} runs (over target):")
        app, token = apps[big]
        print(profile(lambda: wsgi_get(app, "/", token)))
    print()
    q = med[f"GET /?q=sweep-7 {big}"] / med[f"GET /?q=sweep-7 {small}"]
    print(f"GET /?q=sweep-7, {big:,} over {small:,}: {q:.2f}")
    print(f"runs page GET /, {big:,} over {small:,} runs:")
    print(ratio_line(med[f"GET / {big}"] / med[f"GET / {small}"], TARGET_GROWTH))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Server time of the runs page over many runs and of a run page with a "
        "million metric lines, in-process (WSGI) and through `orbit web`.",
    )
    parser.add_argument(
        "--runs",
        default="10000",
        help="runs in the home (10,000); two sizes N,M with --home DIR: only the runs page, "
        "over copies of DIR/N and DIR/M (bench_ps.py --home DIR --runs N,M), the larger over "
        "the smaller",
    )
    parser.add_argument("--repeats", type=int, default=15, help="timed requests of each (15)")
    parser.add_argument("--lines", type=int, default=METRIC_LINES, help="metric lines (1e6)")
    parser.add_argument(
        "--wide-lines", type=int, default=METRIC_LINES, help="lines of 20 keys, case 3 (1e6)"
    )
    parser.add_argument(
        "--parts",
        type=lambda v: v.split(","),
        default=list(PARTS),
        help="which cases, comma-separated: list, run, cold, keys (all)",
    )
    parser.add_argument(
        "--home",
        type=Path,
        help="a home already filled by bench_ps.py (--home): used through a private copy "
        "(hard-linked run directories), so it is never written",
    )
    parser.add_argument(
        "--copies",
        type=Path,
        help="with two sizes: keep the copies in DIR/N and reuse them on later calls",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary homes")
    add_orbit_options(parser, orbit_help="the orbit.py whose `web` server to start")
    args = parser.parse_args()
    try:
        sizes = [int(n) for n in args.runs.split(",")]
    except ValueError:
        parser.error("--runs must be N or N,M")
    if len(sizes) > 2 or (len(sizes) == 2 and args.home is None):
        parser.error("--runs: N, or N,M with --home DIR")
    args.runs = sizes[0]
    if args.runs < 1 or args.repeats < 1 or args.lines < 1 or args.wide_lines < 1:
        parser.error("--runs, --repeats, --lines and --wide-lines must be at least 1")
    if not set(args.parts) <= set(PARTS):
        parser.error(f"--parts: choose from {', '.join(PARTS)}")

    print("bench_web: server time of the runs page and of a run page with many metric lines")
    print(machine(load=True))
    scratch = Path(tempfile.mkdtemp(prefix="orbit-bench-web-"))
    root = scratch / "home"
    pycache = None if args.env_as_is else scratch / "pycache"
    orbit_py = args.orbit.resolve()
    print(setup_lines(orbit_py, root, pycache))
    last: list[str] = []
    if len(sizes) == 2:
        try:
            return bench_growth(args, sizes, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    try:
        if "list" in args.parts:
            _history(args, root)
            list_ms = bench_listing(root, child_environ(root, pycache), orbit_py, args.repeats)
            last.append(f"runs page: {list_ms:.0f} ms (target < {LIST_TARGET_MS:.0f} ms)")
        if "run" in args.parts:
            run_ms, bare_ms, run_bytes = bench_run_page(
                scratch / "metrics-home", pycache, orbit_py, args.repeats, args.lines
            )
            last.append(
                f"run page with {args.lines:,} metric lines: {run_ms:.0f} ms, "
                f"{run_bytes / 1000:.0f} KB (target < {LIST_TARGET_MS:.0f} ms with the "
                f"shepherd's sidecar, < {PAGE_TARGET_BYTES / 1e6:g} MB; without the sidecar "
                f"{bare_ms:.0f} ms)"
            )
        last += _metrics_cases(args, scratch, pycache)
    finally:
        if args.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    print()
    print("\n".join(last))
    return 0


if __name__ == "__main__":
    sys.exit(main())
