"""Named datasets: ORBIT_HOME/datasets.yaml, `orbit data add|ls|rm`, and `run -d NAME` mounting
one into a real container, recorded in run.yaml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ORBIT_PY, SMALL, Orbit

from orbit.errors import ConflictError, CorruptError, NotFoundError, UsageError
from orbit.store import datasets
from orbit.store.files import read_yaml
from orbit.store.home import Home


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "train.txt").write_text("the first line\n")
    return folder


# --- the registry -------------------------------------------------------------------------------
def test_add_load_remove(tmp_path: Path, data: Path) -> None:
    home = Home(tmp_path / "home", {"USER": "alice"})
    assert datasets.load(home) == {}
    (tmp_path / "link").symlink_to(data)
    added = datasets.add(home, "corpus", tmp_path / "link", description="toy text")
    assert added.path == str(data)  # resolved: the link's target
    assert added.added_by == "alice" and added.kind() == "directory"
    single = datasets.add(home, "one.file_v2-x", data / "train.txt")  # a file is a dataset too
    assert single.kind() == "file" and single.description is None

    on_disk = read_yaml(home.root / "datasets.yaml")
    assert on_disk["format"] == 1
    assert on_disk["datasets"]["corpus"] == {
        "path": str(data),
        "added_at": added.added_at,
        "added_by": "alice",
        "description": "toy text",
    }
    assert set(datasets.load(home)) == {"corpus", "one.file_v2-x"}

    with pytest.raises(ConflictError, match="--replace"):
        datasets.add(home, "corpus", data / "train.txt")
    replaced = datasets.add(home, "corpus", data / "train.txt", replace=True)
    assert datasets.load(home)["corpus"].path == replaced.path == str(data / "train.txt")

    assert datasets.remove(home, "corpus").name == "corpus"
    assert set(datasets.load(home)) == {"one.file_v2-x"}
    assert data.exists()  # forgetting a name never touches the data
    with pytest.raises(NotFoundError, match=r"no dataset 'corpus' \(known: one.file_v2-x\)"):
        datasets.remove(home, "corpus")


@pytest.mark.parametrize("name", ["", ".hidden", "-x", "a/b", "a b", "ü", "x" * 65, "a:b"])
def test_bad_names_are_refused(tmp_path: Path, data: Path, name: str) -> None:
    with pytest.raises(UsageError, match="bad dataset name"):
        datasets.add(Home(tmp_path / "home"), name, data)
    assert not (tmp_path / "home" / "datasets.yaml").exists()


def test_bad_paths_are_refused(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    with pytest.raises(UsageError, match=f"does not exist: {tmp_path}/nothing"):
        datasets.add(home, "x", tmp_path / "nothing")
    with pytest.raises(UsageError, match="neither a directory nor a file"):
        datasets.add(home, "x", "/dev/null")
    with pytest.raises(UsageError, match="one non-empty line"):
        datasets.add(home, "x", tmp_path, description="two\nlines")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("format: 1\ndatasets: [a, b]\n", "`datasets` is not a mapping"),
        ("format: 2\ndatasets: {}\n", "format 2 is not one this Orbit reads"),
        ("datasets: {}\n", "format None"),
        ("format: 1\ndatasets:\n  a: {path: relative/x}\n", "dataset 'a' has no absolute `path`"),
        ("format: 1\ndatasets:\n  a: /x\n", "dataset 'a' is not a mapping"),
        ("format: 1\ndatasets:\n  ../a: {path: /x}\n", "has a name Orbit does not accept"),
        ("format: 1\ndatasets: {a: {path: /x\n", "not valid YAML"),
        ("- 1\n", "expected a mapping"),
    ],
)
def test_a_damaged_file_is_one_clear_error(tmp_path: Path, text: str, why: str) -> None:
    home = Home(tmp_path / "home")
    home.root.mkdir()
    (home.root / "datasets.yaml").write_text(text)
    with pytest.raises(CorruptError) as err:
        datasets.load(home)
    message = str(err.value)
    assert message.startswith(f"{home.root}/datasets.yaml: ") and why in message
    assert "\n" not in message


def test_parse_use() -> None:
    assert datasets.parse_use("a") == ("a", None, False)
    assert datasets.parse_use("a:rw") == ("a", None, True)
    assert datasets.parse_use("a:ro") == ("a", None, False)
    assert datasets.parse_use("a:/in") == ("a", "/in", False)
    assert datasets.parse_use("a:/in:rw") == ("a", "/in", True)
    assert datasets.parse_use("a::rw") == ("a", None, True)
    for bad, why in [
        ("a:in", "absolute path"),
        ("a:/in:wr", "mode must be ro or rw"),
        ("a:/in:rw:x", "expects NAME"),
        (":/in", "expects NAME"),
        ("a/b", "bad dataset name"),
    ]:
        with pytest.raises(UsageError, match=why):
            datasets.parse_use(bad)


def test_concurrent_adds_all_land(orbit: Orbit, data: Path) -> None:
    """Each add reads, changes and replaces the file under locks/datasets.lock: eight
    processes at once lose none of the names."""
    procs = [
        subprocess.Popen(
            [sys.executable, ORBIT_PY, "data", "add", f"d{i}", str(data)],
            env=orbit.environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    listed = orbit("data", "ls", "--json").json()["datasets"]
    assert [d["name"] for d in listed] == [f"d{i}" for i in range(8)]


# --- the commands -------------------------------------------------------------------------------
def test_data_commands_and_their_json(orbit: Orbit, data: Path) -> None:
    res = orbit("data", "ls")
    assert res.code == 0 and "no datasets; add one with `orbit data add NAME PATH`" in res.out
    assert orbit("data", "ls", "--json").json() == {"datasets": []}

    (orbit.cwd / "rel").symlink_to(data)
    res = orbit("data", "add", "corpus", "rel", "--description", "toy text")  # relative to cwd
    assert res.code == 0, res.err
    assert res.out == (
        f"dataset corpus: {data}; mount it with `orbit run -d corpus` (read-only at /data/corpus)\n"
    )
    added = orbit("data", "add", "file1", str(data / "train.txt"), "--json")
    assert added.code == 0
    shape = {"name", "path", "description", "added_at", "added_by", "exists", "type"}
    assert set(added.json()) == shape
    assert added.json()["type"] == "file" and added.json()["description"] is None

    again = orbit("data", "add", "corpus", str(data))
    assert again.code == 5 and again.err.count("\n") == 1
    assert "orbit: dataset 'corpus' exists" in again.err and "--replace" in again.err

    (data / "train.txt").rename(data / "moved.txt")  # file1's path is gone now
    listed = orbit("data", "ls", "--json").json()["datasets"]
    assert [set(d) for d in listed] == [shape, shape]
    assert [(d["name"], d["exists"], d["type"]) for d in listed] == [
        ("corpus", True, "directory"),
        ("file1", False, None),
    ]
    text = orbit("data", "ls").out.splitlines()
    assert text[0].split() == ["NAME", "PATH", "EXISTS", "ADDED", "DESCRIPTION"]
    assert text[1].split()[:3] == ["corpus", str(data), "yes"] and text[1].endswith("toy text")
    assert text[2].split()[:3] == ["file1", str(data / "train.txt"), "MISSING"]

    removed = orbit("data", "rm", "file1", "--json")
    assert removed.code == 0 and set(removed.json()) == {"removed"}
    assert removed.json()["removed"]["name"] == "file1"
    res = orbit("data", "rm", "file1")
    assert (res.code, res.err) == (3, "orbit: no dataset 'file1' (known: corpus)\n")
    res = orbit("data", "rm", "corpus")
    assert res.out == f"removed dataset corpus (its data stays at {data})\n"
    assert data.is_dir()

    assert orbit("data").code == 2
    bad = orbit("data", "add", "a/b", str(data))
    assert bad.code == 2 and "bad dataset name 'a/b'" in bad.err
    missing = orbit("data", "add", "x", "nowhere")
    assert missing.err == f"orbit: dataset path does not exist: {orbit.cwd}/nowhere\n"


def test_a_damaged_file_gives_one_line_and_breaks_nothing_else(orbit: Orbit, busybox: str) -> None:
    orbit.home.mkdir(parents=True, exist_ok=True)
    (orbit.home / "datasets.yaml").write_text("format: 1\ndatasets: {a: {path: /x\n")
    for args in (("data", "ls"), ("data", "rm", "a"), ("data", "add", "b", str(orbit.cwd))):
        res = orbit(*args)
        assert res.code == 6, args
        assert res.err.startswith(f"orbit: {orbit.home}/datasets.yaml: not valid YAML")
        assert res.err.count("\n") == 1 and "Traceback" not in res.err
    res = orbit("run", *SMALL, "--image", busybox, "-d", "a", "--", "true")
    assert res.code == 6 and "datasets.yaml" in res.err
    assert not (orbit.home / "runs" / "1").exists()
    # Commands that need no dataset never read the file.
    run_id = orbit.submit(*SMALL, "--image", busybox, "--", "true")
    assert orbit("ps", "-a").code == 0
    assert orbit("wait", run_id).code == 0
    assert orbit("show", run_id, "--json").json()["datasets"] == []


# --- runs ---------------------------------------------------------------------------------------
def test_a_run_mounts_datasets_and_records_them(orbit: Orbit, busybox: str, data: Path) -> None:
    out = orbit.cwd / "out"
    out.mkdir()
    out.chmod(0o777)
    assert orbit("data", "add", "corpus", str(data)).code == 0
    assert orbit("data", "add", "scratch", str(out)).code == 0
    script = (
        "cat /data/corpus/train.txt; "
        "touch /data/corpus/new 2>/dev/null && echo ro-writable || echo ro-refused; "
        "echo written > /scratch/result && echo rw-ok; "
        "cat /elsewhere/train.txt"
    )
    res = orbit(
        "run", *SMALL, "--image", busybox, "-w", "--json",
        "-d", "corpus", "-d", "scratch:/scratch:rw", "-d", "corpus:/elsewhere",
        "--", "sh", "-c", script,
    )  # fmt: skip
    assert res.code == 0, res.err
    shown = res.json()
    assert orbit("logs", shown["id"]).out == ("the first line\nro-refused\nrw-ok\nthe first line\n")
    assert not (data / "new").exists()
    assert (out / "result").read_text() == "written\n"

    uses = [
        {"name": "corpus", "path": str(data), "target": "/data/corpus", "rw": False},
        {"name": "scratch", "path": str(out), "target": "/scratch", "rw": True},
        {"name": "corpus", "path": str(data), "target": "/elsewhere", "rw": False},
    ]
    spec = read_yaml(orbit.run_dir(shown["id"]) / "run.yaml")
    assert spec["datasets"] == uses
    assert spec["mounts"] == [
        {"source": u["path"], "target": u["target"], "rw": u["rw"]} for u in uses
    ]
    assert shown["datasets"] == uses
    text = orbit("show", shown["id"]).out
    assert f"  datasets   corpus at /data/corpus (read-only; {data})\n" in text
    assert f"             scratch at /scratch (read-write; {out})\n" in text

    # Removing the name later changes nothing about the run's record.
    assert orbit("data", "rm", "corpus").code == 0
    assert orbit("show", shown["id"], "--json").json()["datasets"] == uses

    # A run without -d has no `datasets` key in run.yaml, and [] in --json.
    plain = orbit.submit(*SMALL, "--image", busybox, "--", "true")
    assert "datasets" not in read_yaml(orbit.run_dir(plain) / "run.yaml")


def test_refused_at_submit(orbit: Orbit, busybox: str, data: Path, tmp_path: Path) -> None:
    res = orbit("run", *SMALL, "--image", busybox, "-d", "corpus", "--", "true")
    assert res.code == 3
    assert res.err == (
        "orbit: -d corpus: no dataset 'corpus' (none yet: add one with "
        "`orbit data add NAME PATH`)\n"
    )
    gone = tmp_path / "gone"
    gone.mkdir()
    assert orbit("data", "add", "corpus", str(data)).code == 0
    assert orbit("data", "add", "gone", str(gone)).code == 0
    res = orbit("run", *SMALL, "--image", busybox, "-d", "imagenet", "--", "true")
    assert res.code == 3
    assert res.err == "orbit: -d imagenet: no dataset 'imagenet' (known: corpus, gone)\n"
    gone.rmdir()
    res = orbit("run", *SMALL, "--image", busybox, "-d", "gone:rw", "--", "true")
    assert res.code == 2
    assert res.err == (
        f"orbit: -d gone:rw: dataset 'gone' is registered at {gone}, which no longer exists; "
        "`orbit data add gone NEWPATH --replace`, or `orbit data rm gone`\n"
    )
    for args, why in [
        (("-d", "corpus", "-m", f"{data}:/data/corpus/"), "two mounts at /data/corpus (-m and -d)"),
        (("-d", "corpus:/x", "-d", "corpus:/x:rw"), "two mounts at /x"),
        (("-d", "corpus:x"), "-d destination must be an absolute path"),
    ]:
        res = orbit("run", *SMALL, "--image", busybox, *args, "--", "true")
        assert res.code == 2 and why in res.err, res.err
    assert not (orbit.home / "runs" / "1").exists()  # nothing was written


def test_a_sweep_mounts_the_dataset_in_every_run(orbit: Orbit, busybox: str, data: Path) -> None:
    assert orbit("data", "add", "corpus", str(data)).code == 0
    res = orbit(
        "sweep", *SMALL, "--image", busybox, "-g", "sw", "-p", "n=1,2", "-d", "corpus", "-w",
        "--json", "--", "sh", "-c", "head -c {n} /data/corpus/train.txt",
    )  # fmt: skip
    assert res.code == 0, res.err
    ids = [r["id"] for r in res.json()["runs"]]
    assert [orbit("logs", i).out for i in ids] == ["t", "th"]
    for i in ids:
        assert read_yaml(orbit.run_dir(i) / "run.yaml")["datasets"][0]["name"] == "corpus"


def test_the_web_run_page_lists_datasets(tmp_path: Path, data: Path) -> None:
    from test_web_runs import TOKEN, Client

    from orbit.store.model import RunState
    from orbit.store.runs import RunStore
    from orbit.web.app import make_app

    home = Home(tmp_path / "home", {})
    home.ensure()
    use = {"name": "corpus", "path": str(data), "target": "/data/corpus", "rw": False}
    spec = {
        "name": "r",
        "image": "busybox",
        "command": ["true"],
        "resources": {"cpus": 1.0, "mem_gb": 1.0, "gpus": 0},
        "mounts": [{"source": str(data), "target": "/data/corpus", "rw": False}],
        "datasets": [use, {**use, "target": "/rw<b>", "rw": True}],
    }
    run = RunStore(home).create(spec, state=RunState.QUEUED, reason="waiting", actor="test")
    client = Client(make_app(home, token=TOKEN))
    client.login(home)
    page = client.get(f"/runs/{run.id}").text
    assert (
        f"<tr><th>datasets</th><td>corpus at <code>/data/corpus</code> (read-only; "
        f"<code>{data}</code>)</td></tr>"
    ) in page
    assert "corpus at <code>/rw&lt;b&gt;</code> (read-write;" in page  # escaped


def test_doctor_names_datasets_whose_path_is_gone(tmp_path: Path, data: Path) -> None:
    from orbit.doctor import check_datasets

    home = Home(tmp_path / "home", {})
    assert check_datasets(home) == []  # nothing to say before the first dataset
    gone = tmp_path / "gone"
    gone.mkdir()
    datasets.add(home, "corpus", data)
    datasets.add(home, "old", gone)
    (ok,) = check_datasets(home)
    assert (ok.status, ok.detail) == ("OK", "2 named, every path present")
    gone.rmdir()
    (warn,) = check_datasets(home)
    assert warn.status == "WARN" and warn.detail.startswith(f"paths gone: old ({gone})")
    (home.root / "datasets.yaml").write_text("format: 7\n")
    (fail,) = check_datasets(home)
    assert fail.status == "FAIL" and "format 7" in fail.detail
