"""bench_web.py's two metrics cases that a bounded parse is for (not a benchmark itself):

3. The cold run page of 1,000,000 lines × 20 keys (about 306 MB) with no sidecar: the first
   GET /runs/<id> of a fresh server, beside the first GET of the same page of a run with 20
   such lines (the baseline: what a cold page costs when its metrics cost nothing), each first
   in a server of its own. Then how long until the page is whole (the background read).

4. 5,000 lines that each add a key (`f"sample_{i}_loss"`, 353 KB), its run page opened 8 times
   at once on a fresh server, while /api/runs is polled; the baseline is /api/runs on the same
   server before (idle). The figure is the poll's longest wait meanwhile over its idle median.
"""

from __future__ import annotations

import html
import json
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

WIDE_KEYS = 19  # and step: 20 keys
NEW_KEY_LINES = 5000
PARALLEL = 8
COLD_TARGET_MS = 2000.0
IDLE_POLLS = 10


def wide_lines(n: int) -> Iterator[str]:
    """Lines of `step` and 19 values of 6 decimals, compact: about 306 bytes each."""
    rng = random.Random(3)
    for i in range(n):
        values = ",".join(f'"k{j:02d}":{rng.random():.6f}' for j in range(WIDE_KEYS))
        yield f'{{"step":{i},{values}}}\n'


def new_key_lines(n: int) -> Iterator[str]:
    """The common logging bug: a key of its own on every line (about 70 bytes a line)."""
    rng = random.Random(4)
    for i in range(n):
        row = {"step": i, "loss": round(rng.random(), 6), f"sample_{i}_loss": rng.random()}
        yield json.dumps(row) + "\n"


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:,.0f} ms, max {max(values) * 1000:,.0f} ms"


def cold_wide(
    make_run: Callable[[Iterator[str]], tuple[str, int]],
    server: Callable[[], Any],
    get: Callable[[str, str, str], tuple[bytes, float]],
    repeats: int,
    n_lines: int,
) -> tuple[float, float]:
    """Case 3: the cold page's median seconds, and the baseline's."""
    t0 = time.perf_counter()
    big, size = make_run(wide_lines(n_lines))
    small, _ = make_run(wide_lines(20))
    print(f"\n== cold run page, {n_lines:,} lines x {WIDE_KEYS + 1} keys, no sidecar ==")
    print(f"metrics.jsonl {size / 1e6:,.0f} MB, written in {time.perf_counter() - t0:.1f} s")
    bigs: list[float] = []
    smalls: list[float] = []
    whole: list[float] = []
    note = ""
    for _ in range(repeats):
        with server() as srv:
            smalls.append(get(srv.base, f"/runs/{small}", srv.token)[1])
        with server() as srv:
            body, took = get(srv.base, f"/runs/{big}", srv.token)
            bigs.append(took)
            text = body.decode()
            if "metrics-note" in text:
                note = html.unescape(text.split('id="metrics-note">', 1)[1].split("<", 1)[0])
            whole.append(took + _until_whole(srv, get, f"/runs/{big}"))
    print(f"first GET /runs/<big> (fresh server each): {ms(bigs)}; {len(body) / 1000:,.0f} KB")
    print(f"first GET /runs/<20 lines> (the baseline): {ms(smalls)}")
    print(f"the page's note: {note or '(none: the page was whole)'}")
    print(f"until a reload shows the whole file: {ms(whole)}")
    return statistics.median(bigs), statistics.median(smalls)


def _until_whole(srv: Any, get: Callable[[str, str, str], tuple[bytes, float]], path: str) -> float:
    """Seconds until the page no longer says its metrics are being read (polled every 0.5 s)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 600:
        if b"being read" not in get(srv.base, path, srv.token)[0]:
            break
        time.sleep(0.5)
    return time.perf_counter() - t0


def parallel_new_keys(
    make_run: Callable[[Iterator[str]], tuple[str, int]],
    server: Callable[[], Any],
    get: Callable[[str, str, str], tuple[bytes, float]],
    repeats: int,
) -> tuple[float, float]:
    """Case 4: /api/runs's longest wait while 8 views of the run parse (a listing that all
    workers keep waiting is the failure), and its median idle."""
    run_id, size = make_run(new_key_lines(NEW_KEY_LINES))
    print(f"\n== {NEW_KEY_LINES:,} lines that each add a key ({size / 1000:,.0f} KB), "
          f"its page opened {PARALLEL} times at once ==")  # fmt: skip
    pages: list[float] = []
    idle: list[float] = []
    busy: list[float] = []
    for _ in range(repeats):
        with server() as srv:
            get(srv.base, "/api/runs", srv.token)  # the server's first request: warm-up
            idle.extend(get(srv.base, "/api/runs", srv.token)[1] for _ in range(IDLE_POLLS))

            def view(srv: Any = srv) -> None:
                pages.append(get(srv.base, f"/runs/{run_id}", srv.token)[1])

            threads = [threading.Thread(target=view) for _ in range(PARALLEL)]
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                busy.append(get(srv.base, "/api/runs", srv.token)[1])
            for t in threads:
                t.join()
    print(f"each of the {PARALLEL} parallel GET /runs/<id>: {ms(pages)}")
    print(f"GET /api/runs meanwhile ({len(busy)} polls): {ms(busy)}")
    print(f"GET /api/runs idle, the baseline ({len(idle)} polls): {ms(idle)}")
    return max(busy), statistics.median(idle)
