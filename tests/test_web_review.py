"""The web gives the CLI's review answers: a group's settings ranked on /compare?group=G (the
table and JSON of `orbit best --by-params`), which metric, which way and why on that page and
the lessons page, a control that asks for another, the groups to choose from on /lessons, and
"Lessons" in the top bar. Driven through the real WSGI app, over a group of the agent trial's
shape (tests/review_sweep.py trial_group: a counter logged first, acc and loss later, some
settings failing); the CLI's answers come from the real entry point on the same home.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from conftest import Orbit
from review_sweep import Swept, trial_group
from test_web_runs import TOKEN, Client

from orbit.store.home import Home
from orbit.store.model import RunState
from orbit.store.runs import RunStore
from orbit.web.app import make_app

PICKED = "Ranked by the final acc, highest is better (picked, direction by its name)"


@pytest.fixture
def home(orbit: Orbit) -> Home:
    home = Home.from_environ(orbit.environ)
    home.ensure()
    return home


@pytest.fixture
def swept(home: Home) -> Swept:
    return trial_group(RunStore(home))


@pytest.fixture
def client(home: Home, swept: Swept) -> Client:
    c = Client(make_app(home, token=TOKEN))
    c.login(home)
    return c


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))).strip()


def _table(page: str, table_id: str) -> list[tuple[str, list[str]]]:
    """The body rows of the table `table_id`: (the row's class, the text of each cell)."""
    body = page.split(f'<table id="{table_id}">', 1)[1].split("</tbody>", 1)[0]
    body = body.split("<tbody>", 1)[1]
    rows = re.findall(r'<tr(?: class="([^"]*)")?>(.*?)</tr>', body, re.S)
    cell = re.compile(r"<td[^>]*>(.*?)</td>", re.S)
    return [(cls, [_text(c) for c in cell.findall(row)]) for cls, row in rows]


def _line(page: str) -> str:
    found = re.search(r'<p id="objective" class="([^"]*)">(.*?)</p>', page, re.S)
    assert found, page[:2000]
    return _text(found.group(2))


def _selected(page: str, name: str) -> str:
    select = page.split(f'<select name="{name}">', 1)[1].split("</select>", 1)[0]
    chosen = re.findall(r'<option value="([^"]*)" selected>', select)
    assert len(chosen) == 1, select
    return html.unescape(chosen[0])


def _options(page: str, name: str) -> list[str]:
    select = page.split(f'<select name="{name}">', 1)[1].split("</select>", 1)[0]
    return [html.unescape(v) for v in re.findall(r'<option value="([^"]*)"', select)]


def _nav(page: str) -> str:
    found = re.search(r'<a href="([^"]*)" id="nav-lessons">Lessons</a>', page)
    assert found, "no Lessons in the top bar"
    return html.unescape(found.group(1))


def _cli(orbit: Orbit, *args: str) -> Any:
    res = orbit("best", "-g", "nb", "--by-params", "--json", *args)
    assert res.code == 0, res.err
    return res.json()


def test_a_groups_settings_are_ranked_as_orbit_best_ranks_them(
    client: Client, orbit: Orbit, swept: Swept
) -> None:
    r = client.get("/compare", "group=nb")
    assert r.status == 200, r.text
    page = r.text
    assert "<h1>Settings of group nb</h1>" in page
    assert _line(page) == PICKED
    assert "Passed over: step: an axis or a counter; train_docs: an axis or a counter" in page
    rows = _table(page, "settings")
    assert [cells[2] for _, cells in rows] == ["alpha=1", "alpha=5", "alpha=0.1", "alpha=50"]
    best, second, few, failing = rows
    assert best == ("best", ["best", "1", "alpha=1", "0.92 ± 0.01", "3/3", "0", swept[("1", "3")]])
    assert second[0] == "" and second[1][:4] == ["", "2", "alpha=5", "0.87 ± 0.01"]
    assert few[1][1:6] == ["3", "alpha=0.1", "0.715 ± 0.007071", "2/3", "1"]
    assert failing[1][1:] == ["-", "alpha=50", "-", "0/3", "3", "-"]
    assert [c for c, _ in rows].count("best") == 1
    assert f'<a href="/runs/{swept[("1", "3")]}">{swept[("1", "3")]}</a>' in page
    assert "Best setting: <b>alpha=1</b>, mean 0.92 ± 0.01" in page
    # Below: the best run of each setting side by side, best setting first.
    legend = page.split('<p class="legend">', 1)[1].split("</p>", 1)[0]
    shown = re.findall(r'<a href="/runs/(\d+)">', legend)
    assert shown == [swept[("1", "3")], swept[("5", "3")], swept[("0.1", "2")]]
    assert "<th>acc @max</th>" in page  # orbit compare's table of those runs
    # The JSON is `orbit best --by-params --json`'s, for the objective and for another metric.
    assert client.get("/api/compare", "group=nb").json() == _cli(orbit)
    given = client.get("/api/compare", "group=nb&metric=loss&order=min").json()
    assert given == _cli(orbit, "--metric", "loss", "--min")
    assert [s["params"]["alpha"] for s in given["settings"]] == ["5", "1", "0.1", "50"]
    assert client.get("/compare", "group=nope").status == 404
    assert client.get("/compare", "group=nb&ids=1,2").status == 400


def test_the_control_asks_for_another_metric_or_direction(
    client: Client, orbit: Orbit, swept: Swept
) -> None:
    page = client.get("/compare", "group=nb").text
    form = page.split('<form class="filters" id="objective-control"', 1)[1].split("</form>", 1)[0]
    assert 'action="/compare"' in form and '<input type="hidden" name="group" value="nb">' in form
    assert _options(page, "metric") == ["", "step", "train_docs", "acc", "loss"]
    assert _options(page, "order") == ["", "max", "min"]
    assert _selected(page, "metric") == "" and _selected(page, "order") == ""

    # What the form sends: another metric, direction left to the objective (its name).
    by_loss = client.get("/compare", "group=nb&metric=loss&order=").text
    way = "lowest is better (given, direction by its name)"
    assert _line(by_loss) == f"Ranked by the final loss, {way}"
    assert [c[2] for _, c in _table(by_loss, "settings")][:3] == ["alpha=5", "alpha=1", "alpha=0.1"]
    assert _selected(by_loss, "metric") == "loss" and _selected(by_loss, "order") == ""
    # The direction against the name: ranked so, with the warning.
    low = client.get("/compare", "group=nb&metric=&order=min").text
    assert _line(low) == "Ranked by the final acc, lowest is better (picked, direction given)"
    assert "warning: acc:min goes against its name (highest is better by the name)" in low
    assert [c[2] for _, c in _table(low, "settings")][:3] == ["alpha=0.1", "alpha=5", "alpha=1"]
    # NAME:max as the CLI's --metric takes it.
    same = client.get("/compare", "group=nb&metric=acc:max").text
    assert _line(same) == "Ranked by the final acc, highest is better (given)"

    # A declared objective becomes the default, and the page says so.
    assert orbit("group", "objective", "nb", "loss").code == 0
    declared = client.get("/compare", "group=nb").text
    assert _line(declared) == "Ranked by the final loss, lowest is better (declared for group nb)"
    assert _table(declared, "settings")[0][1][2] == "alpha=5"
    assert client.get("/api/compare", "group=nb").json() == _cli(orbit)


def test_a_ranking_that_cannot_be_given_is_one_line_and_a_4xx(
    client: Client, home: Home, swept: Swept
) -> None:
    # As the CLI's exit codes: a metric no run logged is not found (404); one whose name says
    # no direction (and none given) is a usage error (400), whatever else is wrong with it.
    nope = client.get("/compare", "group=nb&metric=test_acc")
    assert nope.status == 404
    line = (
        "not ranked: 'test_acc' was logged by none of the 8 succeeded runs "
        "(they logged: step, train_docs, acc, loss)"
    )
    assert _line(nope.text) == line
    assert 'id="settings"' not in nope.text and "Traceback" not in nope.text
    assert _selected(nope.text, "metric") == "test_acc"  # the control is there to ask again
    assert "test_acc (logged by no succeeded run)" in nope.text
    assert client.get("/compare", "group=nb&metric=nope").status == 400
    unsaid = client.get("/compare", "group=nb&metric=train_docs")
    assert unsaid.status == 400
    assert _line(unsaid.text) == (
        "not ranked: say which way is better for 'train_docs': train_docs:max or "
        "train_docs:min (its name does not say)"
    )
    assert client.get("/compare", "group=nb&order=best").status == 400
    api = client.get("/api/compare", "group=nb&metric=test_acc")
    assert api.status == 404 and api.json()["error"] == line.removeprefix("not ranked: ")
    assert client.get("/api/compare", "group=nb&metric=train_docs").status == 400
    # The lessons page and its API answer alike.
    lessons = client.get("/lessons", "group=nb&metric=test_acc")
    assert lessons.status == 404 and _line(lessons.text) == line
    assert "Lessons of group nb" in lessons.text and 'id="lessons-settings"' not in lessons.text
    assert client.get("/api/lessons", "group=nb&metric=test_acc").status == 404

    # Nothing asked and nothing qualifies: the answer, not an error.
    store = RunStore(home)
    for seed in ("1", "2"):
        run = store.create(
            {"name": f"c{seed}", "group": "counters", "params": {"seed": seed},
             "command": ["true"], "image": "busybox"},
            state=RunState.SUCCEEDED, reason="", actor="test",
        )  # fmt: skip
        run.path("metrics.jsonl").write_text('{"step": 1, "train_docs": 600}\n')
    counted = client.get("/compare", "group=counters")
    assert counted.status == 200
    assert _line(counted.text).startswith(
        "not ranked: no logged metric qualifies as the objective (step: an axis or a counter; "
        "train_docs: an axis or a counter); declare one: orbit group objective counters"
    )
    assert client.get("/api/compare", "group=counters").status == 404  # as orbit best: exit 4
    assert client.get("/lessons", "group=counters").status == 200


def test_the_lessons_page_names_its_objective_and_has_the_control(
    client: Client, swept: Swept
) -> None:
    page = client.get("/lessons", "group=nb").text
    assert _line(page) == PICKED
    rows = _table(page, "lessons-settings")
    assert rows[0][0] == "best" and rows[0][1][1] == "alpha=1"
    assert 'action="/lessons"' in page and _options(page, "metric")[1:] == [
        "step", "train_docs", "acc", "loss"
    ]  # fmt: skip
    assert '<a href="/compare?group=nb">every setting ranked</a>' in page
    by_loss = client.get("/lessons", "group=nb&metric=loss&order=min").text
    assert _line(by_loss) == "Ranked by the final loss, lowest is better (given)"
    assert _table(by_loss, "lessons-settings")[0][1][1] == "alpha=5"
    assert (
        '<a href="/compare?group=nb&amp;metric=loss&amp;order=min">every setting ranked</a>'
        in by_loss
    )


def test_lessons_without_a_group_lists_the_groups(
    client: Client, orbit: Orbit, home: Home, swept: Swept
) -> None:
    trial_group(RunStore(home), group="nb-2")
    assert orbit("group", "objective", "nb", "acc:max").code == 0
    r = client.get("/lessons")
    assert r.status == 200, r.text
    rows = _table(r.text, "lessons-groups")
    assert [cells[0] for _, cells in rows] == ["nb-2", "nb"]  # newest first
    assert rows[1][1][:4] == ["nb", "12", "8 succeeded, 4 failed", "acc:max"]
    assert rows[0][1][3] == "none (picked from what the runs logged)"
    for link in ("/lessons?group=nb", "/compare?group=nb", "/?group=nb"):
        assert f'<a href="{link}">' in r.text, link
    assert client.get("/api/lessons").status == 400
    assert client.get("/lessons", "group=nb&project=/x").status == 400


def test_lessons_is_in_the_top_bar_and_the_runs_list_links_a_group(
    client: Client, swept: Swept
) -> None:
    for path, query, target in (
        ("/", "", "/lessons"),
        ("/", "group=nb", "/lessons?group=nb"),
        ("/failures", "group=nb", "/lessons?group=nb"),
        ("/compare", "group=nb", "/lessons?group=nb"),
        ("/lessons", "group=nb", "/lessons?group=nb"),
        (f"/runs/{swept[('1', '1')]}", "", "/lessons"),
        ("/settings", "", "/lessons"),
    ):
        r = client.get(path, query)
        assert r.status == 200, (path, r.text[:300])
        assert _nav(r.text) == target, path
    filtered = client.get("/", "group=nb").text
    links = filtered.split('id="group-links">', 1)[1].split("</p>", 1)[0]
    assert '<a href="/compare?group=nb">every setting ranked</a>' in links
    assert '<a href="/lessons?group=nb">lessons</a>' in links
    grouped = client.get("/", "groupby=1").text
    header = grouped.split('<tr class="group-row">', 1)[1].split("</tr>", 1)[0]
    assert '<a href="/compare?group=nb">settings</a>' in header
    assert '<a href="/lessons?group=nb">lessons</a>' in header
    assert '<td class="col-group"><a href="/?group=nb"' in client.get("/").text


def test_a_group_name_is_escaped_on_every_review_page(client: Client, home: Home) -> None:
    evil = "<b>x</b>&'\""
    trial_group(RunStore(home), group=evil)
    quoted = "%3Cb%3Ex%3C%2Fb%3E%26%27%22"
    for path, query in (
        ("/compare", f"group={quoted}"),
        ("/lessons", f"group={quoted}"),
        ("/lessons", ""),
        ("/", f"group={quoted}&groupby=1"),
    ):
        r = client.get(path, query)
        assert r.status == 200, (path, r.text[:300])
        assert "<b>x</b>" not in r.text, path
        assert "&lt;b&gt;x&lt;/b&gt;" in r.text, path
        assert "Content-Security-Policy" in {k.title(): v for k, v in r.headers.items()}
    assert _nav(client.get("/compare", f"group={quoted}").text) == f"/lessons?group={quoted}"
    assert f'<a href="/compare?group={quoted}">' in client.get("/lessons").text
