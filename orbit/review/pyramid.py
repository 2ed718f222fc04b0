"""One metric key's points in bounded memory: the minimum and the maximum of each block of `g`
consecutive points, `g` a power of two that doubles whenever more than GROUPS_MAX blocks would
be complete, so at most about 2 * GROUPS_MAX points are kept however long the run.

The state after n points depends on those n points only, never on how they were handed over
(one block of a million or a line at a time): blocks are aligned at multiples of `g` from the
first point and `g` is the smallest power of two with n // g <= GROUPS_MAX. That is what lets
the shepherd save it (metrics.summary.json) and a reader go on from there with the lines
appended since, and get what a parse of the whole file gives.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GROUPS_MAX = 1000

Point = tuple[int, float, float]  # (index of the point in the key's series, x, y)
Group = tuple[Point, Point]  # the first minimum and the first maximum of a block


def canonical_g(n: int) -> int:
    g = 1
    while n // g > GROUPS_MAX:
        g <<= 1
    return g


def _lower(a: Point, b: Point) -> Point:
    """The smaller of two points, `a` the earlier: a tie keeps the earlier point."""
    return a if a[2] <= b[2] else b


def _upper(a: Point, b: Point) -> Point:
    return a if a[2] >= b[2] else b


def _merge(groups: Sequence[Group]) -> Group:
    lo, hi = groups[0]
    for glo, ghi in groups[1:]:
        lo, hi = _lower(lo, glo), _upper(hi, ghi)
    return lo, hi


class Pyramid:
    __slots__ = ("first", "g", "groups", "last", "n", "partial", "pc")

    def __init__(self) -> None:
        self.n = 0
        self.g = 1
        self.groups: list[Group] = []  # complete blocks of g points
        self.partial: Group | None = None  # the last, incomplete block (pc points)
        self.pc = 0
        self.first: Point = (0, 0.0, 0.0)
        self.last: Point = (0, 0.0, 0.0)

    def copy(self) -> Pyramid:
        out = Pyramid()
        out.n, out.g, out.partial, out.pc = self.n, self.g, self.partial, self.pc
        out.groups, out.first, out.last = list(self.groups), self.first, self.last
        return out

    def add(self, xs: Sequence[float], ys: Sequence[float]) -> None:
        """Append points (x and y as floats). At most GROUPS_MAX + 1 slices are scanned, each
        with C-level min/max/index."""
        size = len(ys)
        if not size:
            return
        g = canonical_g(self.n + size)
        if g > self.g:
            self._regroup(g)
        base = self.n

        def scan(lo: int, hi: int) -> Group:
            part = ys[lo:hi]
            a, b = part.index(min(part)), part.index(max(part))
            return (base + lo + a, xs[lo + a], part[a]), (base + lo + b, xs[lo + b], part[b])

        if self.n == 0:
            self.first = (0, xs[0], ys[0])
        i = 0
        if self.partial is not None:
            i = min(g - self.pc, size)
            self.partial = _merge([self.partial, scan(0, i)])
            self.pc += i
            if self.pc == g:
                self.groups.append(self.partial)
                self.partial, self.pc = None, 0
        while size - i >= g:
            self.groups.append(scan(i, i + g))
            i += g
        if i < size:
            self.partial, self.pc = scan(i, size), size - i
        self.n += size
        self.last = (self.n - 1, xs[-1], ys[-1])

    def _regroup(self, g: int) -> None:
        f = g // self.g
        k = len(self.groups)
        whole = k - k % f
        merged = [_merge(self.groups[j : j + f]) for j in range(0, whole, f)]
        rest = self.groups[whole:] + ([self.partial] if self.partial is not None else [])
        self.partial = _merge(rest) if rest else None
        self.pc += (k - whole) * self.g
        self.groups, self.g = merged, g

    def extremes(self) -> tuple[Point, Point]:
        """The first minimum and the first maximum of every point."""
        blocks = self.groups + ([self.partial] if self.partial is not None else [])
        return _merge(blocks)

    def points(self) -> tuple[list[float], list[float]]:
        """The kept points in order: the first and the last, each block's minimum and
        maximum."""
        blocks = self.groups + ([self.partial] if self.partial is not None else [])
        chosen = {p[0]: p for grp in blocks for p in grp}
        chosen[0], chosen[self.last[0]] = self.first, self.last
        ordered = [chosen[i] for i in sorted(chosen)]
        return [p[1] for p in ordered], [p[2] for p in ordered]

    # --- the sidecar's form ------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        def flat(grp: Group) -> list[float]:
            return [*grp[0], *grp[1]]

        return {
            "n": self.n,
            "g": self.g,
            "pc": self.pc,
            "first": list(self.first),
            "last": list(self.last),
            "groups": [flat(grp) for grp in self.groups],
            "partial": flat(self.partial) if self.partial is not None else None,
        }

    @classmethod
    def from_json(cls, data: Any) -> Pyramid:
        """The pyramid `to_json` wrote; ValueError when `data` is not one (damaged)."""
        if not isinstance(data, dict):
            raise ValueError("not an object")
        out = cls()
        n, g, pc = data.get("n"), data.get("g"), data.get("pc")
        if not all(type(v) is int for v in (n, g, pc)):
            raise ValueError("n, g, pc")
        assert isinstance(n, int) and isinstance(g, int) and isinstance(pc, int)
        out.n, out.g, out.pc = n, g, pc
        out.first, out.last = _point(data.get("first"), n), _point(data.get("last"), n)
        raw = data.get("groups")
        if not isinstance(raw, list):
            raise ValueError("groups")
        out.groups = [_group(v, n) for v in raw]
        part = data.get("partial")
        out.partial = None if part is None else _group(part, n)
        if (
            n < 1
            or g != canonical_g(n)
            or not 0 <= pc < g
            or (out.partial is None) != (pc == 0)
            or len(out.groups) * g + pc != n
            or out.last[0] != n - 1
            or out.first[0] != 0
        ):
            raise ValueError("inconsistent")
        return out


def _point(v: Any, n: int) -> Point:
    if not (isinstance(v, list) and len(v) == 3 and type(v[0]) is int and 0 <= v[0] < n):
        raise ValueError("point")
    x, y = v[1], v[2]
    if not (type(x) is float and type(y) is float and math.isfinite(x) and math.isfinite(y)):
        raise ValueError("point")
    return v[0], x, y


def _group(v: Any, n: int) -> Group:
    if not (isinstance(v, list) and len(v) == 6):
        raise ValueError("group")
    return _point(v[:3], n), _point(v[3:], n)


def downsample(
    xs: array[float] | list[float], ys: array[float] | list[float], max_points: int = 1000
) -> tuple[list[float], list[float]]:
    """At most `max_points` points of (xs, ys) in order: the first and last point, and in each
    bucket the LTTB point, the minimum and the maximum. Series keep a Pyramid's points (about
    2,000); a longer input is first cut to the minimum and maximum of 4 * max_points slices."""
    n = len(ys)
    if n <= max_points or n < 3:
        return list(xs), list(ys)
    if max_points < 5:
        raise ValueError("max_points must be at least 5")
    big = n > 8 * max_points
    idx = _minmax_preselect(ys, 4 * max_points) if big else list(range(n))
    buckets = (max_points - 2) // 3
    chosen = _lttb_minmax(xs, ys, idx, buckets)
    return [xs[i] for i in chosen], [ys[i] for i in chosen]


def _minmax_preselect(ys: array[float] | list[float], groups: int) -> list[int]:
    """The index of the minimum and the maximum of each slice of `g` points (C-speed
    min/max/index over slices; `g` a power of two, so that at most `groups` slices), plus the
    first and last index."""
    n = len(ys)
    g = 1 << max(0, math.ceil(math.log2(n / groups)))
    while (n + g - 1) // g > groups:
        g <<= 1
    kept: list[int] = []
    for lo in range(0, n, g):
        part = ys[lo : lo + g]
        a, b = lo + part.index(min(part)), lo + part.index(max(part))
        kept.extend((a, b) if a <= b else (b, a))
    return sorted({0, n - 1, *kept})


def _lttb_minmax(
    xs: array[float] | list[float],
    ys: array[float] | list[float],
    idx: list[int],
    buckets: int,
) -> list[int]:
    m = len(idx)
    out = [idx[0]]
    inner = m - 2
    prev = idx[0]
    for b in range(buckets):
        lo = 1 + b * inner // buckets
        hi = 1 + (b + 1) * inner // buckets
        if hi <= lo:
            continue
        # The average of the next bucket (or the last point) is the triangle's third corner.
        nlo, nhi = hi, min(m - 1, 1 + (b + 2) * inner // buckets)
        if b == buckets - 1 or nhi <= nlo:
            cx, cy = xs[idx[m - 1]], ys[idx[m - 1]]
        else:
            cx = sum(xs[idx[j]] for j in range(nlo, nhi)) / (nhi - nlo)
            cy = sum(ys[idx[j]] for j in range(nlo, nhi)) / (nhi - nlo)
        ax, ay = xs[prev], ys[prev]
        best, best_area = idx[lo], -1.0
        lo_i = hi_i = idx[lo]
        for j in range(lo, hi):
            i = idx[j]
            x, y = xs[i], ys[i]
            area = abs((ax - cx) * (y - ay) - (ax - x) * (cy - ay))
            if area > best_area:
                best, best_area = i, area
            if y < ys[lo_i]:
                lo_i = i
            if y > ys[hi_i]:
                hi_i = i
        out.extend(sorted({best, lo_i, hi_i}))
        prev = best
    if out[-1] != idx[m - 1]:
        out.append(idx[m - 1])
    return out
