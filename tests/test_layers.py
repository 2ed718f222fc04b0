"""The layers point one way: no module imports a layer above its own.

Every `import` in the package counts, at module level, inside functions and under
TYPE_CHECKING alike. The order is docs/architecture.md's ("Layers"); a new package gets its
place in LAYERS and there.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "orbit"

# Lowest first. A module may import its own layer and those before it, never one after it.
LAYERS: list[tuple[str, ...]] = [
    ("orbit", "orbit.errors", "orbit.human", "orbit.detach"),
    ("orbit.harnesses",),
    ("orbit.store",),
    ("orbit.review",),
    ("orbit.sched",),
    ("orbit.execute",),
    ("orbit.service",),
    ("orbit.agents",),
    ("orbit.bench",),
    ("orbit.notify",),
    ("orbit.nodes",),
    ("orbit.env", "orbit.doctor"),
    ("orbit.web",),
    ("orbit.cli",),
    ("orbit.__main__",),
]


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest prefix naming `module`'s place."""
    best, best_len = -1, -1
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_len:
                best, best_len = i, len(name)
    return best


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import statement in the file, nested ones included."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from orbit.store import index` imports orbit.store.index
            found.extend((node.lineno, f"{target}.{a.name}") for a in node.names)
            found.append((node.lineno, target))
    return [(line, mod) for line, mod in found if mod == "orbit" or mod.startswith("orbit.")]


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    missing = [module_name(p) for p in MODULES if layer_of(module_name(p)) < 0]
    assert not missing, f"add these to LAYERS (and docs/architecture.md): {missing}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_no_upward_import(path: Path) -> None:
    own = layer_of(module_name(path))
    upward = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {mod}"
        for line, mod in imports_of(path)
        if layer_of(mod) > own
    ]
    assert not upward, "\n".join(upward)


def test_the_check_sees_a_function_local_upward_import(tmp_path: Path) -> None:
    """The rule itself: a nested import of a higher layer is found (the test can fail)."""
    fake = PACKAGE / "store" / "_layer_probe.py"
    source = "def f():\n    from orbit.cli.common import print_json\n    return print_json\n"
    fake.write_text(source)
    try:
        found = [mod for _, mod in imports_of(fake) if layer_of(mod) > layer_of("orbit.store")]
    finally:
        fake.unlink()
    assert "orbit.cli.common" in found
