"""Which adapter speaks for a benchmark: `harbor`, `asi`, an executable's path (external), or
`python:MODULE:CLASS`, a class importable from Python's path (the tests' own adapters).

Each adapter module is imported only when a benchmark that uses it is touched, so a missing or
broken one fails that benchmark's commands with one line, never the others.
"""

from __future__ import annotations

from importlib import import_module

from orbit.bench.model import Adapter, Benchmark
from orbit.errors import UsageError
from orbit.store.home import Home

BUILT_IN = {
    "harbor": ("orbit.bench.harbor", "HarborAdapter"),
    "asi": ("orbit.bench.asi", "AsiAdapter"),
}
EXTERNAL = ("orbit.bench.external", "ExternalAdapter")
PYTHON = "python:"


def load_adapter(home: Home, bench: Benchmark) -> Adapter:
    """The adapter object for `bench` (its class called with the benchmark and the home)."""
    if bench.adapter.startswith(PYTHON):
        module_name, _, class_name = bench.adapter[len(PYTHON) :].partition(":")
    else:
        module_name, class_name = BUILT_IN.get(bench.adapter, EXTERNAL)
    try:
        module = import_module(module_name)
        cls = getattr(module, class_name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageError(
            f"benchmark {bench.name!r}: its adapter {bench.adapter!r} is not available in this "
            f"Orbit ({module_name}.{class_name}: {exc})"
        ) from None
    adapter: Adapter = cls(bench, home)
    return adapter
