"""The run detail, files, log and compare pages, driven through the real WSGI app."""

from __future__ import annotations

import io
import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from orbit.review.pyramid import downsample
from orbit.review.series import read_metrics
from orbit.store.files import read_jsonl
from orbit.store.home import Home
from orbit.store.model import Run, RunState
from orbit.store.runs import RunStore
from orbit.web.app import make_app
from orbit.web.auth import new_login_code, read_host
from orbit.web.charts import band

TOKEN = "test-token-123"
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode()

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    """Calls the WSGI app directly, with the PATH_INFO exactly as given (no normalising)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.session = ""
        self.csrf = ""
        self.host = ""  # the Host a browser sends: the home's secret name, after login()

    def login(self, home: Home) -> None:
        """Redeem a one-time login code as a browser would; keep the session and form token."""
        self.host = f"{read_host(home)}:7717"
        r = self.get("/login", f"code={new_login_code(home, TOKEN)}", auth=False)
        assert r.status == 303, r.text
        self.session = r.headers["set-cookie"].split(";")[0].split("=", 1)[1]
        page = self.get("/settings").text
        self.csrf = page.split('name="token" value="', 1)[1].split('"', 1)[0]

    def request(
        self,
        method: str,
        path: str,
        *,
        query: str = "",
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        auth: bool = True,
    ) -> Response:
        body = urlencode(form).encode() if form is not None else b""
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path.encode().decode("latin-1"),
            "QUERY_STRING": query,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "7717",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": io.StringIO(),
            "wsgi.version": (1, 0),
            "wsgi.multithread": False,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "CONTENT_LENGTH": str(len(body)),
            **({"HTTP_HOST": self.host} if self.host else {}),
        }
        if form is not None:
            environ["CONTENT_TYPE"] = "application/x-www-form-urlencoded"
        if auth:
            environ["HTTP_COOKIE"] = f"orbit_7717={self.session}"
        for k, v in (headers or {}).items():
            environ["HTTP_" + k.upper().replace("-", "_")] = v
        out: dict[str, Any] = {}

        def start_response(status: str, hdrs: list[tuple[str, str]], exc: Any = None) -> Any:
            out["status"] = int(status.split()[0])
            out["headers"] = {k.lower(): v for k, v in hdrs}
            return lambda data: None

        chunks = self.app(environ, start_response)
        try:
            data = b"".join(chunks)
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        return Response(out["status"], out["headers"], data)

    def get(self, path: str, query: str = "", **kw: Any) -> Response:
        return self.request("GET", path, query=query, **kw)


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path / "home", {})


@pytest.fixture
def store(home: Home) -> RunStore:
    return RunStore(home)


@pytest.fixture
def client(home: Home) -> Client:
    home.ensure()
    client = Client(make_app(home, token=TOKEN))
    client.login(home)
    return client


def make_run(store: RunStore, name: str = "baseline", **params: str) -> Run:
    spec = {
        "name": name,
        "group": "lr",
        "tags": {"lr": params.get("lr", "1e-4")},
        "params": params,
        "image": "python:3.12-slim",
        "command": ["python", "train.py"],
        "resources": {"cpus": 1.0, "mem_gb": 2.0, "gpus": 0},
    }
    fields = {
        "exit_code": 0,
        "started_at": "2026-11-30T06:00:00.000+00:00",
        "lease": {"cpus": 1.0, "mem_gb": 2.0, "gpus": []},
        "peaks": {"mem_bytes": 3563520, "cpu_cores": 0.9, "cpu_seconds": 0.55},
    }
    run = store.create(
        spec, state=RunState.SUCCEEDED, reason="", actor="test", status_fields=fields
    )
    with open(run.path("metrics.jsonl"), "w") as fh:
        for step in range(1, 51):
            fh.write(json.dumps({"step": step, "loss": 1.0 / step, "acc": step / 50}) + "\n")
    run.path("log.txt").write_text("epoch 1\n<script>alert(1)</script>\nepoch 2 done\n")
    out = run.path("output")
    (out / "result.json").write_text('{"score": 0.91, "list": [1, 2]}')
    (out / "table.csv").write_text("a,b\n" + "".join(f"{i},{i * i}\n" for i in range(500)))
    (out / "plot.png").write_bytes(PNG)
    (out / "sub").mkdir()
    (out / "sub" / "notes.txt").write_text("hello <b>there</b>\n")
    run.path("code.diff").write_text(
        "diff --git a/train.py b/train.py\n@@ -1 +1 @@\n-lr = 1\n+lr = 2\n"
    )
    return run


def test_detail_page_renders_every_section(client: Client, store: RunStore) -> None:
    run = make_run(store, lr="1e-4")
    r = client.get(f"/runs/{run.id}")
    assert r.status == 200, r.text
    page = r.text
    for part in (
        "baseline",
        "succeeded",
        "python train.py",
        "Measured peaks",
        "3.4 MiB",  # peak memory
        'data-src="/api/series?ids=',  # the charts: uPlot draws them (static/charts.js)
        '<figure class="metric" data-key="loss">',
        ">loss<",
        ">acc<",
        "result.json",
        "table.csv",
        'class="add">+lr = 2',
        'class="del">-lr = 1',
        "No agent session was recorded for this run",
        'name="token"',
        "/static/run.js",
    ):
        assert part in page, part


def test_detail_page_needs_the_token(client: Client, store: RunStore) -> None:
    run = make_run(store)
    assert client.get(f"/runs/{run.id}", auth=False).status in (302, 303)
    assert client.get(f"/api/runs/{run.id}/log", auth=False).status == 401
    assert client.get("/runs/999").status == 404


def test_log_script_is_shown_as_text(client: Client, store: RunStore) -> None:
    run = make_run(store)
    page = client.get(f"/runs/{run.id}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert" not in page


def test_log_ranges(client: Client, store: RunStore) -> None:
    run = make_run(store)
    lines = [f"line {i}\n" for i in range(10000)]
    run.path("log.txt").write_text("".join(lines))
    size = os.path.getsize(run.path("log.txt"))
    r = client.get(f"/api/runs/{run.id}/log", "offset=0&limit=1000").json()
    assert r["start"] == 0 and r["text"].startswith("line 0\n") and r["text"].endswith("\n")
    assert r["next_offset"] == len(r["text"].encode()) <= 1000 and not r["eof"]
    r2 = client.get(f"/api/runs/{run.id}/log", f"offset={r['next_offset']}&limit=1000").json()
    first = r2["text"].splitlines()[0]
    assert first == f"line {len(r['text'].splitlines())}"  # continues on the next line
    tail = client.get(f"/api/runs/{run.id}/log", "offset=-1&limit=100").json()
    assert tail["eof"] and tail["next_offset"] == size and tail["text"].endswith("line 9999\n")
    assert tail["text"].startswith("line ")  # the cut first line is dropped
    before = client.get(f"/api/runs/{run.id}/log", f"before={tail['start']}&limit=100").json()
    assert before["text"].endswith(lines[-len(tail["text"].splitlines()) - 1])
    # The limit is capped: a 2 GB log is never read whole.
    big = client.get(f"/api/runs/{run.id}/log", "offset=0&limit=999999999999").json()
    assert len(big["text"]) <= 1 << 20
    # A log cut back (shepherd restart) below the reader's offset starts again.
    reset = client.get(f"/api/runs/{run.id}/log", f"offset={size + 50}&limit=100").json()
    assert reset["reset"]
    assert client.get(f"/api/runs/{run.id}/log", "offset=x").status == 400


def test_traversal_is_refused(client: Client, store: RunStore, home: Home) -> None:
    run = make_run(store)
    (home.root / "config.yaml").write_text("secret: 1\n")
    for path in (
        f"/runs/{run.id}/files/../../config.yaml",
        f"/runs/{run.id}/files/../../../config.yaml",
        f"/runs/{run.id}/files/sub/../../status.yaml",
        f"/runs/{run.id}/files//etc/passwd",
        f"/runs/{run.id}/session/../run.yaml",
    ):
        r = client.get(path)
        assert r.status in (403, 404), path
        assert b"secret" not in r.body and b"root:" not in r.body
    os.symlink("/etc/passwd", run.path("output") / "passwd")
    os.symlink("../../..", run.path("output") / "up")
    for path in ("passwd", "passwd?raw=1", "up/config.yaml", "up"):
        p, _, q = path.partition("?")
        r = client.get(f"/runs/{run.id}/files/{p}", q)
        assert r.status == 403, path
        assert b"root:" not in r.body and b"secret" not in r.body
    # A symlink that stays inside output/ is fine.
    os.symlink("sub/notes.txt", run.path("output") / "inside.txt")
    assert client.get(f"/runs/{run.id}/files/inside.txt").status == 200
    # The run id itself cannot name a path.
    assert client.get("/runs/..%2F..%2Fconfig.yaml").status == 404


def test_previews(client: Client, store: RunStore) -> None:
    run = make_run(store)
    listing = client.get(f"/runs/{run.id}/files/")
    assert listing.status == 200 and "plot.png" in listing.text and "sub/" in listing.text
    j = client.get(f"/runs/{run.id}/files/result.json").text
    assert "&quot;score&quot;: 0.91" in j and "\n  &quot;list&quot;" in j  # pretty-printed
    csv_page = client.get(f"/runs/{run.id}/files/table.csv").text
    assert "<th>a</th><th>b</th>" in csv_page
    assert "<td>199</td><td>39601</td>" in csv_page and "<td>200</td>" not in csv_page
    img = client.get(f"/runs/{run.id}/files/plot.png")
    assert '<img class="preview"' in img.text
    raw = client.get(f"/runs/{run.id}/files/plot.png", "raw=1")
    assert raw.status == 200 and raw.headers["content-type"] == "image/png" and raw.body == PNG
    txt = client.get(f"/runs/{run.id}/files/sub/notes.txt")
    assert "hello &lt;b&gt;there&lt;/b&gt;" in txt.text
    raw_txt = client.get(f"/runs/{run.id}/files/sub/notes.txt", "raw=1")
    assert raw_txt.headers["content-type"].startswith("text/plain")
    (run.path("output") / "evil.html").write_text("<script>alert(1)</script>")
    evil = client.get(f"/runs/{run.id}/files/evil.html", "raw=1")
    assert evil.headers["content-type"].startswith("text/plain")  # never served as a page
    diff = client.get(f"/runs/{run.id}/code.diff")
    assert diff.status == 200 and diff.text.startswith("diff --git")


def test_session_files_are_listed(client: Client, store: RunStore) -> None:
    run = make_run(store)
    run.path("session").mkdir()
    run.path("session").joinpath("transcript.jsonl").write_text('{"role": "user"}\n')
    page = client.get(f"/runs/{run.id}").text
    assert "transcript.jsonl" in page and "No agent session" not in page
    assert client.get(f"/runs/{run.id}/session/transcript.jsonl").status == 200


def test_lttb_keeps_min_and_max_and_caps_points() -> None:
    rng = random.Random(1)
    n = 200_000
    xs = [float(i) for i in range(n)]
    ys = [rng.gauss(0, 1) for _ in range(n)]
    ys[12345] = 100.0  # one spike up, one down: both must survive
    ys[150001] = -100.0
    px, py = downsample(xs, ys, 1000)
    assert len(px) <= 1000
    assert 100.0 in py and -100.0 in py
    assert px == sorted(px) and px[0] == 0.0 and px[-1] == n - 1
    _, small_y = downsample(xs[:10], ys[:10], 1000)
    assert small_y == ys[:10]
    # Every bucket's extremes are kept: the max of any 1/300 slice shows up.
    for b in range(0, n, n // 50):
        chunk = ys[b : b + n // 400]
        assert max(py) >= max(chunk)


def test_metrics_x_axis_and_keys(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"step": 1, "loss": 1.0, "name": "x"}\nnot json\n{"step": 2, "loss": NaN}\n'
        '{"loss": 0.5, "val": true}\n{"step": 3, "loss": 0.25, "acc": 0.9}\n{"step": 4, "loss": 0.1'
    )
    m = read_metrics(path)
    assert m.x_label == "step"
    assert m.series["loss"].x == [1.0, 2.0, 3.0] and m.series["loss"].y == [1.0, 0.5, 0.25]
    assert "name" not in m.series and "val" not in m.series
    nostep = tmp_path / "n.jsonl"
    nostep.write_text('{"a": 1}\n{"a": 2}\n')
    assert read_metrics(nostep).x_label == "line"
    assert read_metrics(nostep).series["a"].x == [1.0, 2.0]


@pytest.mark.slow
def test_a_million_metric_lines(client: Client, store: RunStore) -> None:
    run = make_run(store)
    with open(run.path("metrics.jsonl"), "w") as fh:
        block = []
        for step in range(1_000_000):
            block.append(f'{{"step": {step}, "loss": {1.0 / (step + 1):.6f}, "lr": 0.001}}\n')
            if len(block) == 10000:
                fh.write("".join(block))
                block = []
    t0 = time.monotonic()
    r = client.get(f"/runs/{run.id}")
    elapsed = time.monotonic() - t0
    assert r.status == 200
    print(f"1M-line metrics: page {len(r.body)} bytes in {elapsed:.2f} s")
    assert len(r.body) < 1_000_000
    assert elapsed < 15  # a few seconds on a quiet machine; the CI box is shared
    # First a preview (pieces of the whole file) while the rest is read in the background.
    assert "a sample of" in r.text and "the rest is being read" in r.text
    for _ in range(600):
        if "1000000 points (down-sampled)" in r.text:
            break
        time.sleep(0.1)
        r = client.get(f"/runs/{run.id}")
    assert "1000000 points (down-sampled)" in r.text and "being read" not in r.text
    t1 = time.monotonic()
    assert client.get(f"/runs/{run.id}").status == 200
    assert time.monotonic() - t1 < 1.0  # cached until the file changes
    api = client.get(f"/api/runs/{run.id}/metrics").json()
    assert len(api["series"]["loss"]["x"]) <= 1000 and api["series"]["loss"]["count"] == 1_000_000


def test_the_charts_data_of_runs_and_a_group(client: Client, store: RunStore) -> None:
    runs = [make_run(store, f"s{i}", lr=str(i // 3), seed=str(i % 3)) for i in range(6)]
    ids = ",".join(r.id for r in runs)
    got = client.get("/api/series", f"ids={ids}").json()
    assert [r["id"] for r in got["runs"]] == [r.id for r in runs]  # any number: no cap of 10
    assert got["keys"] == ["loss", "acc"] and got["x_label"] == "step"
    assert got["x_keys"][:2] == ["step", "line"] and "acc" in got["x_keys"]
    # Two settings (lr) of three seeds: a band each, its mean and std those of the seeds.
    assert [s["runs"] for s in got["settings"]] == [
        [r.id for r in runs[:3]],
        [r.id for r in runs[3:]],
    ]
    xs, mean, lo, hi = got["settings"][0]["bands"]["loss"]
    assert xs[0] == 1 and mean[0] == lo[0] == hi[0] == 1.0  # the seeds logged the same values
    assert {r["color"] for r in got["runs"][:3]} == {got["settings"][0]["color"]}
    # Only the points after x = 45, against another axis, from a group.
    later = client.get("/api/series", f"ids={runs[0].id}&since=45").json()
    assert later["runs"][0]["series"]["loss"][0] == [46, 47, 48, 49, 50] and later["settings"] == []
    by_acc = client.get("/api/series", f"ids={runs[0].id}&x=acc").json()
    assert by_acc["runs"][0]["series"]["loss"][0][:2] == [0.02, 0.04]
    by_line = client.get("/api/series", f"ids={runs[0].id}&x=line").json()
    assert by_line["x_label"] == "line" and "step" in by_line["keys"]
    assert len(client.get("/api/series", "group=lr").json()["runs"]) == 6
    for query, status in (
        (f"ids={ids}&since=soon", 400),
        (f"ids={ids}&points=many", 400),
        (f"ids={ids}&x=" + "k" * 201, 400),
        ("ids=", 400),
        ("ids=999", 404),
        ("group=nope", 404),
        (f"group=lr&ids={ids}", 400),
    ):
        assert client.get("/api/series", query).status == status, query
    assert client.get("/api/series", f"ids={ids}&since=nan").status == 200  # as no since


def test_a_band_is_the_mean_and_std_on_the_common_range_and_never_inf() -> None:
    xs, mean, lo, hi = band([[[1, 2, 3], [1.0, 2.0, 3.0]], [[2, 3, 4], [4.0, 5.0, 6.0]]])
    assert (xs[0], xs[-1], len(xs)) == (2, 3, 100)  # where both runs have points
    assert (mean[0], lo[0], hi[0]) == pytest.approx((3.0, 3 - 1.4142136, 3 + 1.4142136))
    unsorted = band([[[3, 1, 2], [3.0, 1.0, 2.0]], [[1, 2, 3], [1.0, 2.0, 3.0]]])
    assert unsorted[1][0] == 1.0 and unsorted[1][-1] == 3.0
    huge = band([[[1, 2], [1e308, 1e308]], [[1, 2], [-1e308, 1.7e308]]])
    assert huge[1][0] == 0.0 and huge[3][0] == pytest.approx(1.414214e308)
    assert huge[1][1] is None  # past a float's range: a gap, not inf (which JSON cannot hold)
    assert json.dumps(huge, allow_nan=False)


def test_compare_highlights_differences(client: Client, store: RunStore) -> None:
    a = make_run(store, "a", lr="1e-4", seed="1")
    b = make_run(store, "b", lr="3e-4", seed="1")
    r = client.get("/compare", f"ids={a.id},{b.id}")
    assert r.status == 200, r.text
    page = r.text
    assert "1e-4" in page and "3e-4" in page
    assert '<tr class="differs"><th>lr</th>' in page
    assert '<tr class=""><th>seed</th>' in page
    assert f'data-src="/api/series?ids={a.id},{b.id}"' in page  # the charts' data (uPlot)
    charts = client.get("/api/series", f"ids={a.id},{b.id}").json()
    assert [r["id"] for r in charts["runs"]] == [a.id, b.id]
    assert all(set(r["series"]) == {"loss", "acc"} for r in charts["runs"])
    assert f"{a.id} (a)" in page and f"{b.id} (b)" in page
    assert client.get("/compare", "ids=").status == 400
    assert client.get("/compare", f"ids={a.id},999").status == 404
    # The page's table is `orbit compare`'s: the metric's min, max and the step of the best.
    assert "<th>loss min</th>" in page and "<th>acc @max</th>" in page


def test_compare_api_is_orbit_compare_json(client: Client, store: RunStore) -> None:
    a = make_run(store, "a", lr="1e-4", seed="1")
    b = make_run(store, "b", lr="3e-4", seed="1")
    query = f"ids={a.id},{b.id}&metric=acc&result=result.json:score&result=output/none.json:x"
    data = client.get("/api/compare", query).json()
    assert [r["id"] for r in data["runs"]] == [a.id, b.id]
    assert [r["params.lr"] for r in data["runs"]] == [0.0001, 0.0003]
    assert data["same"]["params.seed"] == 1 and data["same"]["acc.best_step"] == 50
    assert data["metrics"] == [{"name": "acc", "goal": "max", "why": "by its name"}]
    assert [r["output/result.json:score"] for r in data["runs"]] == [0.91, 0.91]
    assert [r["output/none.json:x"] for r in data["runs"]] == [None, None]
    loss = client.get("/api/compare", f"ids={a.id}").json()["runs"][0]
    assert (loss["loss.min"], loss["loss.best_step"], loss["loss.max"]) == (0.02, 50, 1.0)
    assert client.get("/api/compare", f"ids={a.id}&result=../x:k").status == 400
    assert client.get("/api/compare", f"ids={a.id},999").status == 404


def test_posting_a_note(client: Client, store: RunStore) -> None:
    run = make_run(store)
    url = f"/runs/{run.id}/notes"
    refused = client.request("POST", url, form={"text": "no token"})
    assert refused.status == 403
    form = {"text": "  lr 3e-4 <b>diverges</b>  ", "token": client.csrf}
    r = client.request("POST", url, form=form)
    assert r.status == 303 and r.headers["location"].endswith(f"/runs/{run.id}#notes")
    notes = read_jsonl(run.path("notes.jsonl"))
    assert [n["text"] for n in notes] == ["lr 3e-4 <b>diverges</b>"]
    assert notes[0]["author"].startswith("web:")
    page = client.get(f"/runs/{run.id}").text
    assert "lr 3e-4 &lt;b&gt;diverges&lt;/b&gt;" in page
    r = client.request(
        "POST",
        url,
        form={"text": "via header"},
        headers={"X-Orbit-Token": TOKEN, "Accept": "application/json"},
    )
    assert r.status == 200 and r.json()["text"] == "via header"
    assert client.request("POST", url, form={"text": " ", "token": client.csrf}).status == 400


def test_a_2_gb_log_is_read_by_range(client: Client, store: RunStore) -> None:
    run = make_run(store)
    with open(run.path("log.txt"), "wb") as fh:  # sparse: 2 GiB of NULs, then two lines
        fh.truncate(2 << 30)
        fh.seek(2 << 30)
        fh.write(b"almost done\nlast <line>\n")
    t0 = time.monotonic()
    page = client.get(f"/runs/{run.id}")
    assert page.status == 200 and "last &lt;line&gt;" in page.text
    assert len(page.body) < 200_000
    tail = client.get(f"/api/runs/{run.id}/log", "offset=-1&limit=4096").json()
    assert tail["text"].endswith("last <line>\n") and tail["size"] == (2 << 30) + 24
    middle = client.get(f"/api/runs/{run.id}/log", "offset=1000000000&limit=65536").json()
    assert len(middle["text"]) == 65536 and middle["next_offset"] == 1_000_065_536
    assert time.monotonic() - t0 < 5


def test_folders_that_point_outside_are_refused(client: Client, store: RunStore) -> None:
    run = make_run(store)
    os.symlink("/etc", run.path("session"))
    page = client.get(f"/runs/{run.id}")
    assert page.status == 200 and "No agent session was recorded" in page.text
    assert client.get(f"/runs/{run.id}/session/passwd").status == 403
    assert client.get(f"/runs/{run.id}/session/").status == 403


def test_odd_file_names_are_linked_and_escaped(client: Client, store: RunStore) -> None:
    run = make_run(store)
    (run.path("output") / "a #1 <x>.txt").write_text("odd\n")
    listing = client.get(f"/runs/{run.id}/files/").text
    assert 'href="/runs/1/files/a%20%231%20%3Cx%3E.txt"' in listing
    assert "a #1 &lt;x&gt;.txt" in listing
    assert client.get(f"/runs/{run.id}/files/a #1 <x>.txt").status == 200
