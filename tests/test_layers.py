"""The layers point one way: no module imports a layer above its own.

Every `import` in the package counts, at module level, inside functions and under
TYPE_CHECKING alike. The order is docs/architecture.md's ("Layers"), and the test reads that
table: every package and top-level module is named there and in LAYERS, the two agree, and a
module neither names fails. A module a process starts by its name (`python -m orbit.…`, a
string the code holds) must exist, and a lower layer may start one of a higher layer only along
an edge the docs' "Processes started by name" table lists.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "orbit"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"

# Lowest first. A module may import its own layer and those before it, never one after it.
# "orbit" is the package's own __init__ only: it is no prefix, so a new package or top-level
# module has no layer until it is named here.
LAYERS: list[tuple[str, ...]] = [
    ("orbit", "orbit.errors", "orbit.human", "orbit.detach", "orbit.record"),
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
    ("orbit.feishu",),
    ("orbit.env", "orbit.doctor"),
    ("orbit.web",),
    ("orbit.cli", "orbit.mcp"),
    ("orbit.__main__",),
]

# (the place in LAYERS of the module that starts it, the module started): the edges up the
# layers that a process boundary makes legitimate. docs/architecture.md lists the same.
PROCESS_EDGES: set[tuple[str, str]] = {
    ("orbit.store", "orbit.notify.sender"),
    ("orbit.store", "orbit.feishu.bot"),
    ("orbit.sched", "orbit.service.ticker"),
    ("orbit.sched", "orbit.nodes.probe"),
    ("orbit.sched", "orbit.execute.slurm_job"),
    ("orbit.execute", "orbit.nodes.mirror"),
    ("orbit.service", "orbit.__main__"),
    ("orbit.agents", "orbit.__main__"),
    # Not processes: the transcript parsers a harness names by module path, which
    # review/conversation.py imports (a lower layer names them; review imports review).
    ("orbit.harnesses", "orbit.review.claude_code"),
    ("orbit.harnesses", "orbit.review.rollout"),
}


def place_of(module: str) -> str | None:
    """The name in LAYERS that is `module` or the package holding it ("orbit" only itself)."""
    best: str | None = None
    for names in LAYERS:
        for name in names:
            holds = module == name or (name != "orbit" and module.startswith(name + "."))
            if holds and (best is None or len(name) > len(best)):
                best = name
    return best


def layer_of(module: str) -> int:
    """The index in LAYERS of `module`'s place; -1 when no entry names it."""
    place = place_of(module)
    return next((i for i, names in enumerate(LAYERS) if place in names), -1)


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    """Whether `name` (orbit.…) is a module or package of the source tree."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import statement in the file, nested ones included.
    `from X import name` counts as X.name when that is a module, else as X."""
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
            subs = [f"{target}.{a.name}" for a in node.names if is_module(f"{target}.{a.name}")]
            found.extend((node.lineno, sub) for sub in subs)
            found.append((node.lineno, target))
    return [(line, mod) for line, mod in found if mod == "orbit" or mod.startswith("orbit.")]


MODULES = sorted(PACKAGE.rglob("*.py"))


def docs_table(heading: str) -> list[list[str]]:
    """The rows of the first table under `heading` in docs/architecture.md, each row the
    backticked names of each cell."""
    lines = ARCHITECTURE.read_text().split(f"\n{heading}\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:  # past the header and its rule
        if not line.startswith("|"):
            break
        rows.append([" ".join(re.findall(r"`([^`]+)`", c)) for c in line.strip("|").split("|")])
    return rows


def dotted(doc_name: str) -> str:
    """A file or folder as docs/architecture.md writes it (`store/`, `errors.py`,
    `orbit/__init__.py`) as a module name."""
    if doc_name == "orbit/__init__.py":
        return "orbit"
    return "orbit." + doc_name.removesuffix("/").removesuffix(".py").replace("/", ".")


def test_every_module_has_a_layer() -> None:
    missing = [module_name(p) for p in MODULES if layer_of(module_name(p)) < 0]
    assert not missing, f"add these to LAYERS (and docs/architecture.md): {missing}"


def test_a_new_package_or_module_has_no_layer() -> None:
    """The rule itself: nothing is placed by the package's prefix alone."""
    assert layer_of("orbit.brand_new_pkg.mod") == -1
    assert layer_of("orbit.brand_new_module") == -1
    assert layer_of("orbit") == 0
    assert layer_of("orbit.store.files") == layer_of("orbit.store") == 2
    assert layer_of("orbit.cli.run") == len(LAYERS) - 2


def test_the_docs_name_the_same_layers() -> None:
    documented = [{dotted(n) for n in row[0].split()} for row in docs_table("## Layers")]
    assert documented == [set(names) for names in LAYERS]


def test_every_import_names_a_placed_module() -> None:
    """An import of orbit.X resolves to a layer (else no upward check could see it)."""
    unplaced = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {mod}"
        for path in MODULES
        for line, mod in imports_of(path)
        if layer_of(mod) < 0
    ]
    assert not unplaced, "\n".join(unplaced)


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


# A string that names a module: the package's name, dotted names after it.
NAMED = re.compile(r"orbit(?:\.[A-Za-z_]\w*)+")
RUN_PACKAGE = re.compile(r"(?:^|\s)-m orbit(?=\s|$)")  # `-m orbit` inside a command string


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants in `tree` (prose, which names modules freely)."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            found.add(id(body[0].value))
    return found


def named_modules(source: str) -> set[str]:
    """The orbit modules `source` names in string literals: whole strings like
    "orbit.notify.sender" (whose first part is one of the package's modules: "orbit.css" is a
    file name), and `-m orbit`, as an argv ("-m", "orbit") or inside a command string, which
    runs orbit.__main__."""
    tree = ast.parse(source)
    prose = docstrings(tree)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            if NAMED.fullmatch(node.value) and is_module(".".join(node.value.split(".")[:2])):
                found.add(node.value)
            if RUN_PACKAGE.search(node.value):
                found.add("orbit.__main__")
        elif isinstance(node, (ast.List, ast.Tuple)):
            texts = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if any(a == "-m" and b == "orbit" for a, b in itertools.pairwise(texts)):
                found.add("orbit.__main__")
    return found


NAMED_BY = {module_name(p): named_modules(p.read_text()) for p in MODULES}


def test_the_scan_finds_modules_started_by_name() -> None:
    """The rule itself: the forms the code uses are seen, prose and file names are not."""
    source = (
        '"""Starts `python -m orbit.nodes.gone`."""\n'
        'MODULE = "orbit.notify.sender"\n'
        'argv = [sys.executable, "-m", "orbit", "web"]\n'
        'MARK = "-m orbit hook"\n'
        'STYLE = "orbit.css"\n'
    )
    assert named_modules(source) == {"orbit.notify.sender", "orbit.__main__"}
    assert named_modules('cmd = "python -m orbitx"\n') == set()
    assert "orbit.notify.sender" in NAMED_BY["orbit.store.outbox"]  # the scan reads the tree


def test_every_module_named_in_a_string_exists() -> None:
    missing = [
        f"{by} names {mod}"
        for by, mods in NAMED_BY.items()
        for mod in mods
        if importlib.util.find_spec(mod) is None
    ]
    assert not missing, "\n".join(missing)


def upward_names() -> set[tuple[str, str]]:
    """(place of the naming module, module named) for each name that points up the layers."""
    return {
        (str(place_of(by)), mod)
        for by, mods in NAMED_BY.items()
        for mod in mods
        if layer_of(mod) > layer_of(by)
    }


def test_a_module_named_up_the_layers_is_a_listed_process_edge() -> None:
    unlisted = sorted(upward_names() - PROCESS_EDGES)
    assert not unlisted, f"add to PROCESS_EDGES and docs/architecture.md: {unlisted}"
    stale = sorted(PROCESS_EDGES - upward_names())
    assert not stale, f"no module starts these any more: {stale}"


def test_the_docs_list_the_same_process_edges() -> None:
    rows = docs_table("### Processes started by name")
    assert {(dotted(row[0]), row[1]) for row in rows} == PROCESS_EDGES


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other round a circle (Tarjan's strongly
    connected components of more than one module), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_circle_finder_sees_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_modules_import_each_other_round_a_circle() -> None:
    """Function-local imports count too: a circle makes either side's change the other's."""
    names = {module_name(p) for p in MODULES}
    graph = {
        module_name(p): {m for _, m in imports_of(p) if m in names and m != module_name(p)}
        for p in MODULES
    }
    assert circles(graph) == []
