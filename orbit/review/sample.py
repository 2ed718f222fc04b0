"""A preview of a big metrics file in milliseconds: evenly spaced pieces of it parsed, the last
one its end, so a chart shows the whole run's shape (down-sampled more coarsely) while the
whole file is read in the background (series.py).

The pieces are whole lines: the start of each piece up to its first newline is dropped, and so
is what follows its last one; a line longer than a piece is never in a preview. For a file
without an x key, the line numbers are estimated from the newlines per byte of what was read.
"""

from __future__ import annotations

from orbit.review.parse import Parsed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PIECES = 64
PIECE_BYTES = 32 << 10  # 2 MiB in all


def sample(fh: Any, start: int, size: int, x_key: str | None = None) -> tuple[Parsed, int]:
    """The parse of PIECES evenly spaced pieces of the file's bytes [start, size), and how
    many bytes those pieces held."""
    state = Parsed(start, x_key)
    span = size - start
    newlines = bytes_read = 0
    for i in range(PIECES):
        at = start + span * i // PIECES if i < PIECES - 1 else max(start, size - PIECE_BYTES)
        fh.seek(at)
        raw = fh.read(min(PIECE_BYTES, size - at))
        first = 0 if at == 0 else raw.find(b"\n") + 1
        cut = raw.rfind(b"\n") + 1
        if cut <= first:
            continue
        block = raw[first:cut]
        newlines += block.count(b"\n")
        bytes_read += len(block)
        # The line number where the piece starts, as the density of lines read so far says.
        state.line_no = max(state.line_no, round((at + first - start) * newlines / bytes_read))
        state.consume(block)
        state.offset = at + cut
    return state, bytes_read
