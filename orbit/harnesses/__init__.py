"""The harness registry: the coding agents Orbit knows, one module each.

A harness module defines `HARNESS`, an orbit.harnesses.base.Harness: its names, where its
skills go, how it runs inside a run's container (`cli`), how its transcripts are told and read
(`transcript`). Every other part of Orbit asks this registry; adding a harness is a new module
and its line in MODULES (docs/agents.md, "Adding a harness").

MODULES' order is the order Orbit lists harnesses in (`orbit auth add --harness`, bench
methods), tries their transcript formats in, and checks their shell markers in; `orbit plugin`
lists the agents it installs hooks for first.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from orbit.errors import UsageError
from orbit.harnesses.base import Cli, Harness

MODULES = (
    "orbit.harnesses.codex",
    "orbit.harnesses.claude_code",
    "orbit.harnesses.pi",
    "orbit.harnesses.dsh",
)
_extra: list[str] = []  # modules added by `adding` (tests)
_loaded: dict[str, Harness] = {}


def _harness(module: str) -> Harness:
    if module not in _loaded:
        found = getattr(importlib.import_module(module), "HARNESS", None)
        if not isinstance(found, Harness):
            raise TypeError(f"{module} defines no HARNESS")
        _loaded[module] = found
    return _loaded[module]


def every() -> tuple[Harness, ...]:
    """Every registered harness, in MODULES' order."""
    return tuple(_harness(m) for m in (*MODULES, *_extra))


def get(harness_id: str) -> Harness:
    """The harness of this id; KeyError for none."""
    for h in every():
        if h.id == harness_id:
            return h
    raise KeyError(harness_id)


def in_container() -> tuple[Harness, ...]:
    """The harnesses whose CLI Orbit runs inside a run's container."""
    return tuple(h for h in every() if h.cli is not None)


def ids() -> tuple[str, ...]:
    """The ids of those: auth profiles' `harness`, bench methods' agents."""
    return tuple(h.id for h in in_container())


def cli_of(harness_id: str) -> Cli:
    """The in-container CLI of this harness; UsageError when there is none."""
    h = next((h for h in in_container() if h.id == harness_id), None)
    if h is None or h.cli is None:
        raise UsageError(f"unknown harness {harness_id!r} (one of {', '.join(ids())})")
    return h.cli


def by_plugin_name(name: str) -> Harness | None:
    return next((h for h in every() if h.plugin == name), None)


def plugin_order() -> tuple[Harness, ...]:
    """The agents `orbit plugin` knows: those it installs hooks for first."""
    return tuple(sorted(every(), key=lambda h: h.hook_fragment is None))


def by_format(fmt: str) -> Harness | None:
    """The harness whose transcripts are in format `fmt` ("claude", "codex")."""
    return next((h for h in every() if h.transcript and h.transcript.format == fmt), None)


def transcript_parser(fmt: str) -> str:
    """The module that parses transcripts in format `fmt`: its harness's, else the one that
    reads unknown formats."""
    for h in every():
        if h.transcript is not None and h.transcript.format == fmt:
            return h.transcript.parser
    return next(h.transcript.parser for h in every() if h.transcript and h.transcript.reads_unknown)


def format_of(obj: dict[str, Any]) -> str:
    """The transcript format a first JSON line is in; "unknown" when no harness claims it."""
    for h in every():
        if h.transcript is not None and h.transcript.claims(obj):
            return h.transcript.format
    return "unknown"


def format_of_cut(kind: str, cut: str) -> str:
    """The same for a first line cut short: its first `"type"` value and its text; ""."""
    for h in every():
        if h.transcript is not None and h.transcript.claims_cut(kind, cut):
            return h.transcript.format
    return ""


def agent_of_shell(environ: Mapping[str, str]) -> str | None:
    """The id of the harness whose shell `environ` is, by the variables it sets there."""
    for h in every():
        if any(environ.get(var) for var in h.markers):
            return h.id
    return None


@contextmanager
def adding(module: str) -> Iterator[Harness]:
    """Register one more harness module while the block runs: how a test proves that a harness
    outside MODULES is taken up everywhere."""
    _extra.append(module)
    try:
        yield _harness(module)
    finally:
        _extra.remove(module)
