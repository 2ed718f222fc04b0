"""The log as the run page shows it (orbit/web/logtext.py, loglines.py) on files written here:
line numbers across the index's MiB blocks, search paging, a progress bar cut by a window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orbit.web import loglines, logtext


def _log(tmp_path: Path, lines: list[str], tail: str = "") -> Path:
    path = tmp_path / "log.txt"
    path.write_text("".join(line + "\n" for line in lines) + tail)
    return path


def test_line_numbers_and_offsets_agree_across_blocks(tmp_path: Path) -> None:
    lines = [f"line {i} " + "x" * (i % 97) for i in range(1, 60_001)]  # ~3.4 MB: 4 blocks
    path = _log(tmp_path, lines)
    data = path.read_bytes()
    assert loglines.search(path, "no such text")["done"]  # a search counts as it reads
    assert loglines.index_for(path.stat()).marks == [
        data.count(b"\n", 0, i * loglines.BLOCK) for i in range(len(data) // loglines.BLOCK + 1)
    ]
    for n in (1, 2, 17_000, 30_001, 59_999, 60_000):
        at = loglines.offset_of(path, n, 5.0)
        assert at is not None and data[at:].startswith(f"line {n} ".encode()), n
        assert loglines.line_of(path, at, 5.0) == n
    assert loglines.offset_of(path, 60_002, 5.0) is None
    win = loglines.around_line(path, 30_001, 4096, 5.0)
    assert win is not None and any("id='L30001'" in html for html in win["lines"])


def test_search_pages_through_the_whole_log(tmp_path: Path, monkeypatch: Any) -> None:
    lines = [
        f"step {i}" + (" \x1b[31mERR\x1b[0mOR here" if i % 1000 == 0 else "")
        for i in range(1, 20_001)
    ]
    path = _log(tmp_path, lines)
    first = loglines.search(path, "error", 1)
    assert [m["line"] for m in first["matches"]] == list(range(1000, 20_001, 1000))
    assert first["done"] and first["matches"][0]["text"] == "step 1000 ERROR here"
    monkeypatch.setattr(loglines, "SEARCH_MAX", 3)
    page = loglines.search(path, "error", 1)
    assert [m["line"] for m in page["matches"]] == [1000, 2000, 3000]
    assert not page["done"] and page["next_line"] == 3001
    more = loglines.search(path, "error", page["next_line"])
    assert [m["line"] for m in more["matches"]] == [4000, 5000, 6000]


def test_a_bar_still_drawing_is_sent_again_whole(tmp_path: Path) -> None:
    path = _log(tmp_path, ["epoch 1"], tail="\r 10%|#   \r 50%|#####")
    win = loglines.window(path, 0, 1 << 20, budget=1.0)
    assert win["partial"] and win["next_offset"] == len("epoch 1\n")
    assert win["lines"][-1].endswith("<span class='t'> 50%|#####</span>\n</span>")
    with open(path, "a") as fh:
        fh.write("\r100%|##########|\n")
    again = loglines.window(path, win["next_offset"], 1 << 20, budget=1.0)
    assert not again["partial"] and again["first_line"] == 2
    assert "<span class='t'>100%|##########|</span>" in again["lines"][0]
    cut = loglines.window(path, len("epoch 1\n") + 5, 1 << 20, budget=1.0)
    assert cut["continued"] and cut["restarts"]


def test_escapes_other_than_colours_are_dropped() -> None:
    html, _ = logtext.line_html(
        "\x1b]8;;javascript:alert(1)\x1b\\<b>x</b>\x1b]8;;\x1b\\\x1b[2K\x1b[1A"
    )
    assert html == "&lt;b&gt;x&lt;/b&gt;"
    assert logtext.line_html("\x1b[38;2;300;0;0mred")[0] == '<span style="color:#ff0000">red</span>'


def test_another_log_at_the_same_inode_is_counted_anew(tmp_path: Path) -> None:
    path = _log(tmp_path, [f"old {i}" for i in range(300_000)])  # over 2 MiB: marks kept
    assert loglines.line_of(path, path.stat().st_size - 1, 5.0) == 300_000
    with open(path, "r+") as fh:  # the same inode, another log (as a reused inode would be)
        fh.truncate(0)
        fh.write("".join(f"new line {i} " + "y" * 40 + "\n" for i in range(100_000)))
    size = path.stat().st_size
    assert loglines.line_of(path, size - 1, 5.0) == 100_000
    assert loglines.offset_of(path, 50_001, 5.0) == path.read_bytes().index(b"new line 50000 ")
