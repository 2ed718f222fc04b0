"""A log's text as the run page shows it: one implementation, used by the page, the log API and
the log search.

- Carriage returns: a line that a progress bar (tqdm) rewrote with `\\r` shows its last state
  only, the text after its last carriage return that shows something (`text\\r` at a line's
  end, a CRLF, keeps the text).
- ANSI: SGR sequences (16, 256 and 24-bit colours, bold, dim, italic, underline, strike,
  inverse, reset) become `<span>`s with classes (the 16 colours) or a `style` attribute that
  holds nothing but a colour made from numbers here (256 and 24-bit); every other escape
  sequence (cursor moves, erase line, OSC titles and OSC-8 links, lone ESC) and every other
  control character is dropped, never turned into markup. All text is HTML-escaped.
- A line longer than LINE_SHOWN characters shows its start and a "show all" button; the rest is
  in the page, hidden.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from html import escape

LINE_SHOWN = 10_000  # characters of a line shown before its "show all" control

# Every escape sequence: CSI (ESC [ … final, or the C1 byte), OSC (ESC ] … BEL or ST, an
# unterminated one up to the line's end), the other two-character ESC sequences, a lone ESC.
_ESCAPE = re.compile(
    r"(?:\x1b\[|\x9b)([0-?]*)[ -/]*([@-~])"
    r"|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b\n]*(?:\x1b\\)?"
    r"|\x1b[ -/]*[0-~]?"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# The 16 colours are classes (run.css); 256 and 24-bit colours are inline styles.
_CUBE = (0, 95, 135, 175, 215, 255)


@dataclass(frozen=True)
class Style:
    """The SGR state: a colour is an int 0-15 (a class) or an "#rrggbb" string (a style)."""

    fg: int | str | None = None
    bg: int | str | None = None
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False
    strike: bool = False
    inverse: bool = False

    def attrs(self) -> str:
        """The span's attributes ("" for the default style)."""
        fg, bg = (self.bg, self.fg) if self.inverse else (self.fg, self.bg)
        classes = [n for n, on in _FLAGS if getattr(self, on)]
        styles = []
        for prefix, value in (("f", fg), ("b", bg)):
            if isinstance(value, int):
                classes.append(f"a-{prefix}{value}")
            elif isinstance(value, str):
                styles.append(f"{'color' if prefix == 'f' else 'background'}:{value}")
        if self.inverse and fg is None:
            classes.append("a-fi")
        if self.inverse and bg is None:
            classes.append("a-bi")
        out = f' class="{" ".join(classes)}"' if classes else ""
        return out + (f' style="{";".join(styles)}"' if styles else "")


_FLAGS = (("a-bold", "bold"), ("a-dim", "dim"), ("a-it", "italic"), ("a-ul", "underline"),
          ("a-st", "strike"))  # fmt: skip
_SET = {1: ("bold", True), 2: ("dim", True), 3: ("italic", True), 4: ("underline", True),
        7: ("inverse", True), 9: ("strike", True), 22: ("bold", False), 23: ("italic", False),
        24: ("underline", False), 27: ("inverse", False), 29: ("strike", False)}  # fmt: skip
PLAIN = Style()


def _hex(r: int, g: int, b: int) -> str:
    return f"#{min(r, 255):02x}{min(g, 255):02x}{min(b, 255):02x}"


def _color256(n: int) -> int | str | None:
    if n < 16:
        return n
    if n < 232:
        n -= 16
        return _hex(_CUBE[n // 36], _CUBE[n // 6 % 6], _CUBE[n % 6])
    if n < 256:
        v = 8 + 10 * (n - 232)
        return _hex(v, v, v)
    return None


def _extended(codes: list[int], i: int) -> tuple[int | str | None, int]:
    """The colour of `38;5;N` or `38;2;R;G;B` at codes[i] (the 5 or 2), and the next index."""
    if i < len(codes) and codes[i] == 5 and i + 1 < len(codes):
        return _color256(codes[i + 1]), i + 2
    if i < len(codes) and codes[i] == 2 and i + 3 < len(codes):
        return _hex(*codes[i + 1 : i + 4]), i + 4
    return None, len(codes)


def apply_sgr(style: Style, params: str) -> Style:
    """The style after `ESC [ params m`."""
    try:
        codes = [int(p) if p else 0 for p in params.replace(":", ";").split(";")][:32]
    except ValueError:
        return style
    i = 0
    while i < len(codes):
        c = codes[i]
        i += 1
        if c == 0:
            style = PLAIN
        elif c in _SET:
            name, on = _SET[c]
            style = replace(style, **{name: on})
            if c == 22:
                style = replace(style, dim=False)
        elif 30 <= c <= 37 or 90 <= c <= 97:
            style = replace(style, fg=c - 30 if c < 90 else c - 82)
        elif 40 <= c <= 47 or 100 <= c <= 107:
            style = replace(style, bg=c - 40 if c < 100 else c - 92)
        elif c in (38, 48):
            color, i = _extended(codes, i)
            style = replace(style, fg=color) if c == 38 else replace(style, bg=color)
        elif c == 39:
            style = replace(style, fg=None)
        elif c == 49:
            style = replace(style, bg=None)
    return style


def last_state(line: str) -> tuple[str, str]:
    """A line rewritten with carriage returns as its last state: (the part shown, the part
    overwritten before it, whose SGR codes still set the style)."""
    if "\r" not in line:
        return line, ""
    parts = line.split("\r")
    for i in range(len(parts) - 1, -1, -1):
        if plain(parts[i]).strip():
            return parts[i], "\r".join(parts[:i])
    return parts[-1], "\r".join(parts[:-1])


def plain(text: str) -> str:
    """`text` without escape sequences and control characters (tabs kept)."""
    if "\x1b" in text or "\x9b" in text:
        text = _ESCAPE.sub("", text)
    return _CONTROL.sub("", text) if _CONTROL.search(text) else text


def shown(line: str) -> str:
    """A line's text as the page shows it, without styles (the search matches this)."""
    return plain(last_state(line)[0])


def _styled(text: str, style: Style) -> tuple[list[tuple[str, Style]], Style]:
    """`text` cut into (plain text, style) runs, and the style at its end."""
    runs: list[tuple[str, Style]] = []
    pos = 0
    for m in _ESCAPE.finditer(text):
        if m.start() > pos:
            runs.append((text[pos : m.start()], style))
        if m.group(2) == "m":
            style = apply_sgr(style, m.group(1) or "")
        pos = m.end()
    if pos < len(text):
        runs.append((text[pos:], style))
    return runs, style


def _skip_styles(text: str, style: Style) -> Style:
    for m in _ESCAPE.finditer(text):
        if m.group(2) == "m":
            style = apply_sgr(style, m.group(1) or "")
    return style


def _html(runs: list[tuple[str, Style]]) -> str:
    out = []
    for text, style in runs:
        text = escape(_CONTROL.sub("", text), quote=False)
        attrs = style.attrs()
        out.append(f"<span{attrs}>{text}</span>" if attrs else text)
    return "".join(out)


def _cut(runs: list[tuple[str, Style]]) -> tuple[str, str, int]:
    """The HTML of the first LINE_SHOWN characters, that of the rest, and the total count."""
    total = sum(len(t) for t, _ in runs)
    if total <= LINE_SHOWN:
        return _html(runs), "", total
    head, rest, n = [], [], 0
    for text, style in runs:
        take = max(0, min(len(text), LINE_SHOWN - n))
        if take:
            head.append((text[:take], style))
        if take < len(text):
            rest.append((text[take:], style))
        n += len(text)
    return _html(head), _html(rest), total


def line_html(line: str, style: Style = PLAIN) -> tuple[str, Style]:
    """One log line (without its newline) as HTML, and the style it leaves for the next."""
    last, overwritten = last_state(line)
    style = _skip_styles(overwritten, style) if overwritten else style
    runs, style = _styled(last, style)
    head, rest, total = _cut(runs)
    if rest:
        head += (
            f'<span class="rest" hidden>{rest}</span>'
            f'<button type="button" class="show-all">show all {total:,} characters</button>'
        )
    return head, style


def lines_html(text: str, first: int | None) -> list[tuple[int | None, str]]:
    """The lines of `text` (a window of the log that starts a line) as (number, HTML):
    numbered from `first` (None: not known), a style carried from line to line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out: list[tuple[int | None, str]] = []
    style = PLAIN
    for i, line in enumerate(lines):
        html, style = line_html(line, style)
        out.append((None if first is None else first + i, html))
    return out


def wrap(number: int | None, html: str) -> str:
    """One line as the page's <pre> holds it: its number (a link to its anchor) and its text.
    (Single quotes: a window of 10,000 lines goes out as JSON, which would escape double.)"""
    if number is None:
        return f"<span class='l'><span class='t'>{html}</span>\n</span>"
    return (
        f"<span class='l' id='L{number}'><a class='ln' href='#L{number}' data-n='{number}'></a>"
        f"<span class='t'>{html}</span>\n</span>"
    )


def block_html(lines: list[str]) -> str:
    """Lines shown as a block without numbers (a failed run's last lines)."""
    return "\n".join(html for _, html in lines_html("\n".join(lines), None))
