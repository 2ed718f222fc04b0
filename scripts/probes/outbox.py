"""Probe: the notification outbox under damage and under a failing message (audit D6, P16).

    PYTHONPATH=. python scripts/probes/outbox.py [--image orbit-test/busybox:1]

Two scenarios, each in a fresh temporary ORBIT_HOME, with real runs in Docker and a real
local receiver (127.0.0.1):

1. Damage: a webhook profile (--on failed,group) whose receiver is down; a group of 5 runs
   fails, so 5 run messages and the group summary are queued and retrying. With the sender
   paused (SIGSTOP), run 3's queue file is garbled and run 1's emptied; the receiver starts and
   the sender goes on. Reported: what the receiver got, what was kept aside, what
   `orbit notify log` and `orbit doctor` say.
2. Head of line: the receiver answers 500 to run 1's message, 200 to the others. Run 1 fails,
   and once its first 500 is in, run 2 fails. Reported: the time from run 2's message being
   queued to its delivery, and how often run 1's had been tried by then.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
KEY_HEADER = "X-Orbit-Idempotency-Key"


class Receiver:
    """Records each POST's key and arrival time; answers `status_for(key)`."""

    def __init__(self, port: int = 0, status_for: Callable[[str], int] = lambda k: 200) -> None:
        self.got: list[tuple[str, float]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                key = self.headers.get(KEY_HEADER, "")
                receiver.got.append((key, time.time()))
                status = status_for(key)
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"no")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    probe = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = int(probe.server_address[1])
    probe.server_close()
    return port


class Home:
    def __init__(self, root: Path, image: str) -> None:
        self.root = root
        self.image = image
        self.environ = {**os.environ, "ORBIT_HOME": str(root)}
        self.environ["PYTHONPATH"] = str(ROOT)

    def orbit(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, str(ROOT / "orbit.py"), *args],
            env=self.environ, capture_output=True, text=True, timeout=300, cwd=self.root,
        )  # fmt: skip
        if check and proc.returncode != 0:
            raise SystemExit(f"orbit {' '.join(args)}: exit {proc.returncode}: {proc.stderr}")
        return proc

    def failing_run(self, code: int, group: str) -> str:
        out = self.orbit(
            "run", "--no-project", "--image", self.image, "--cpus", "0.2", "--mem", "0.05",
            "-g", group, "--json", "--", "sh", "-c", f"exit {code}",
        ).stdout  # fmt: skip
        return str(json.loads(out)["id"])

    def queue_files(self, profile: str) -> list[Path]:
        folder = self.root / "notify" / "queue" / profile
        return sorted(folder.glob("*.json")) + sorted(folder.glob(".batch*.json"))

    def sender_pid(self) -> int | None:
        from orbit.store.locks import lock_holder

        holder = lock_holder(self.root / "notify" / "sender.lock")
        return holder.pid if holder else None

    def sender_alive(self) -> bool:
        from orbit.store.locks import is_locked

        return is_locked(self.root / "notify" / "sender.lock")


def wait(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what}")
        time.sleep(0.05)


def file_of(home: Home, profile: str, key: str) -> Path | None:
    return next((p for p in home.queue_files(profile) if f"-{key}-" in p.name), None)


def damage(home: Home) -> None:
    port = free_port()  # nothing listens there yet: the receiver is down
    home.environ["HOOK"] = f"http://127.0.0.1:{port}/hook"
    home.orbit("notify", "add", "wh", "--kind", "webhook", "--url-env", "HOOK",
               "--on", "failed,group")  # fmt: skip
    runs = [home.failing_run(i, "pb") for i in range(1, 6)]
    keys = [f"run-{r}-failed" for r in runs]
    wait(lambda: all(file_of(home, "wh", k) for k in keys), 180, "the 5 run messages queued")
    wait(lambda: len(home.queue_files("wh")) >= 6, 60, "the group summary queued")
    pid = home.sender_pid()
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # so that no write of its own lands between ours
    try:
        garbled, emptied = file_of(home, "wh", keys[2]), file_of(home, "wh", keys[0])
        assert garbled and emptied
        garbled.write_bytes(b"\x00\xff{ garbage")
        emptied.write_bytes(b"")
        print(f"garbled {garbled.name}, emptied {emptied.name}")
        receiver = Receiver(port)
        up = time.time()
    finally:
        os.kill(pid, signal.SIGCONT)
    try:
        wait(lambda: not home.sender_alive(), 300, "the sender to finish")
    finally:
        receiver.close()
    got = [k for k, _ in receiver.got]
    last = max((at for _, at in receiver.got), default=up) - up
    print(f"delivered {len(set(got))} distinct key(s) in {len(got)} request(s), the last "
          f"{last:.1f} s after the receiver came up: {', '.join(got)}")  # fmt: skip
    damaged = sorted(p for p in (home.root / "notify" / "damaged").rglob("*") if p.is_file())
    names = ", ".join(str(p.relative_to(home.root)) for p in damaged)
    print(f"kept aside: {len(damaged)}: {names}")
    rows = json.loads(home.orbit("notify", "log", "-n", "100", "--json").stdout)
    named = [r for r in rows if r["outcome"] == "given up (damaged)"]
    print(f"notify log: {len(named)} 'given up (damaged)' row(s):")
    for r in named:
        print(f"  {r['title']}: {r['detail']}")
    checks = json.loads(home.orbit("doctor", "--json", check=False).stdout)["checks"]
    for c in checks:
        if c["name"] == "notify":
            print(f"doctor: {c['status']} {c['detail']}\n  fix: {c['fix']}")


def head_of_line(home: Home) -> None:
    first: list[str] = []
    receiver = Receiver(status_for=lambda key: 500 if first and key == first[0] else 200)
    home.environ["HOOK"] = f"http://127.0.0.1:{receiver.port}/hook"
    home.orbit("notify", "add", "wh", "--kind", "webhook", "--url-env", "HOOK", "--on", "failed")
    try:
        r1 = home.failing_run(1, "hol")
        first.append(f"run-{r1}-failed")
        wait(lambda: any(k == first[0] for k, _ in receiver.got), 120, "run 1's first 500")
        r2 = home.failing_run(2, "hol")
        k2 = f"run-{r2}-failed"
        wait(lambda: any(k == k2 for k, _ in receiver.got), 300, "run 2's delivery")
        delivered = next(at for k, at in receiver.got if k == k2)
        shown = json.loads(home.orbit("show", r2, "--json").stdout)
        settled = datetime.fromisoformat(shown["finished_at"]).timestamp()
        tries = sum(1 for k, at in receiver.got if k == first[0] and at <= delivered)
        print(f"head of line: run 2's message delivered {delivered - settled:.2f} s after its run "
              f"was settled (its event written; queued within the sender's 0.5 s look); run 1's "
              f"had been tried {tries} time(s) by then, all 500")  # fmt: skip
        pid = home.sender_pid()
        if pid:
            os.kill(pid, signal.SIGKILL)  # run 1's retries would go on for 25 minutes
    finally:
        receiver.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="orbit-test/busybox:1")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    for name, scenario in (("damage", damage), ("head of line", head_of_line)):
        with tempfile.TemporaryDirectory(prefix="orbit-probe-") as tmp:
            print(f"--- {name}")
            scenario(Home(Path(tmp), args.image))


if __name__ == "__main__":
    main()
