"""Declared = imported: each dependency pyproject.toml declares is used, and each third-party
package the code imports is declared (the runtime ones by orbit/, the dev extra by the tests,
benchmarks and scripts, or by the test command's tools). `orbit doctor` checks what the
installed distribution requires.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from orbit import doctor

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
RUNTIME = PYPROJECT["project"]["dependencies"]
DEV = PYPROJECT["project"]["optional-dependencies"]["dev"]
TEST_SCRIPT = (ROOT / "scripts" / "test.sh").read_text()
# Installed by the test command itself, pinned and without dependencies (harbor: its metadata
# asks for Python 3.12, its trajectory models import on 3.11), so not in the dev extra.
PINNED_BY_TEST_SCRIPT = set(re.findall(r"--no-deps[^|;]*?([a-z][a-z0-9_-]*)==[0-9]", TEST_SCRIPT))
# Modules loaded by a string, not an import statement.
BY_NAME = ("importorskip", "import_module")


def dist_name(requirement: str) -> str:
    """The distribution's normalized name (PEP 503) in a requirement like "pyyaml>=6.0"."""
    name = re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def import_names() -> dict[str, set[str]]:
    """Installed distribution (normalized) → the top-level names it installs."""
    names: dict[str, set[str]] = {}
    for top, dists in metadata.packages_distributions().items():
        for dist in dists:
            names.setdefault(dist_name(dist), set()).add(top)
    return names


def imports_in(paths: list[Path]) -> set[str]:
    """The top-level names of the absolute imports in `paths` (and those loaded by name)."""
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) in BY_NAME:
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.add(arg.value)
    return {name.split(".")[0] for name in found}


def third_party(names: set[str], local: set[str]) -> set[str]:
    return names - set(sys.stdlib_module_names) - local - {"__future__"}


def python_files(*places: str) -> list[Path]:
    return [p for place in places for p in (ROOT / place).rglob("*.py")]


ORBIT = imports_in(python_files("orbit"))
# The test and benchmark helpers import each other by their bare names, and the stand-ins
# (tests/standins/) are packages of their own.
AROUND_FILES = python_files("tests", "benchmarks", "scripts")
# The modules and the folders of modules around the package (`from standins.feishu import …`).
LOCAL = {p.stem for p in AROUND_FILES} | {p.parent.name for p in AROUND_FILES} | {"orbit"}
AROUND = imports_in([*AROUND_FILES, ROOT / "orbit.py"])
NAMES = import_names()


def test_each_runtime_dependency_is_imported_by_orbit() -> None:
    unused = [req for req in RUNTIME if not NAMES.get(dist_name(req), set()) & ORBIT]
    assert not unused, f"declared in pyproject.toml, imported nowhere in orbit/: {unused}"


def test_each_third_party_import_in_orbit_is_a_runtime_dependency() -> None:
    declared = {top for req in RUNTIME for top in NAMES.get(dist_name(req), set())}
    undeclared = sorted(third_party(ORBIT, {"orbit"}) - declared)
    assert not undeclared, f"imported by orbit/, not in [project] dependencies: {undeclared}"


def used_in_development(requirement: str) -> bool:
    """Imported by the tests, benchmarks or scripts; a type-stub distribution of a package
    something imports (types-PyYAML: yaml-stubs); or a tool the test command runs."""
    tops = NAMES.get(dist_name(requirement), set())
    stubbed = {top.removesuffix("-stubs") for top in tops if top.endswith("-stubs")}
    ran = {top for top in tops if f"-m {top} " in TEST_SCRIPT}
    return bool(tops & AROUND or stubbed & (ORBIT | AROUND) or ran)


def test_each_dev_dependency_is_used() -> None:
    unused = [req for req in DEV if not used_in_development(req)]
    assert not unused, f"in the dev extra, used by nothing: {unused}"


def test_each_third_party_import_around_orbit_is_declared() -> None:
    declared = {top for req in RUNTIME + DEV for top in NAMES.get(dist_name(req), set())}
    declared |= {top for name in PINNED_BY_TEST_SCRIPT for top in NAMES.get(dist_name(name), set())}
    undeclared = sorted(third_party(AROUND, LOCAL) - declared)
    assert not undeclared, f"imported by tests/benchmarks/scripts, not declared: {undeclared}"


def test_the_checks_see_an_unused_and_an_undeclared_package() -> None:
    """The rules themselves: a stub of nothing imported is unused, a stray import undeclared."""
    assert not used_in_development("types-requests")
    assert used_in_development("types-PyYAML") and used_in_development("ruff")
    assert third_party({"requests", "json", "orbit", "yaml"}, {"orbit"}) == {"requests", "yaml"}


def test_doctor_checks_what_the_distribution_requires() -> None:
    required = {dist_name(name) for name in doctor.runtime_requirements()}
    # The installed metadata may be older than this checkout's pyproject.toml, never smaller.
    assert {dist_name(req) for req in RUNTIME} <= required
    assert "waitress" in required and "docker" not in required  # the web's server; a dev tool
    assert doctor.check_packages(sorted(required)).status == doctor.OK


def test_doctor_names_a_missing_package() -> None:
    check = doctor.check_packages(["psutil", "no-such-distribution-orbit"])
    assert (check.status, check.detail) == (doctor.FAIL, "missing: no-such-distribution-orbit")
