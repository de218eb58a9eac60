"""The package reads as the pipeline (ARCHITECTURE.md): each layer imports only the layers before it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "clrlayout"

#: the layers in pipeline order; a module may import its own layer's modules and any earlier layer's
LAYERS = [
    {"errors", "limits", "findings", "util", "formats"},
    {"dump"},
    {"runtime"},
    {"types"},
    {"heap"},
    {"objects"},
    {"analyses", "graph", "native"},
    {"session", "parallel"},
    {"model"},
    {"present"},
    {"trim", "live", "fleet"},
    {"commands"},
    {"cli", "__main__"},
]


def _rank(module: str) -> int:
    top = module.split(".")[1] if "." in module else module
    for i, layer in enumerate(LAYERS):
        if top in layer:
            return i
    raise AssertionError(f"{module}: not in any layer of ARCHITECTURE.md")


def _imports() -> dict[str, set[str]]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    graph = {}
    for name, path in mods.items():
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = pkg
                for _ in range(max(0, node.level - 1)):
                    base = base.rpartition(".")[0]
                mod = (base + "." + node.module if node.module else base) if node.level else (node.module or "")
                found |= {t for t in [mod] + [f"{mod}.{a.name}" for a in node.names] if t in mods}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in mods}
        graph[name] = found - {name}
    return graph


def test_layers_only_look_down():
    wrong = []
    for module, targets in _imports().items():
        if module == "clrlayout":  # the package root re-exports the public API
            continue
        for target in targets:
            if target != "clrlayout" and _rank(target) > _rank(module):
                wrong.append(f"{module} imports {target}")
    assert not wrong


def test_no_import_cycles():
    graph = _imports()
    state: dict[str, int] = {}

    def visit(node: str, path: list) -> None:
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                raise AssertionError(" -> ".join(path[path.index(nxt):] + [nxt]) if nxt in path else nxt)
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [node])


def test_library_messages_name_options_as_the_api_does():
    """Below the commands, a message names an option as ``clrlayout.open``'s keyword (``method_table=``), never
    as a command-line flag: the CLI's chokepoints show flags (errors.as_flags)."""
    import re

    below = {name for layer in LAYERS[: LAYERS.index({"present"})] for name in layer}
    found = []
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[0] not in below or parts[0] == "errors":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                    and re.search(r"(^|[\s(])--[a-z]", node.value):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value[:60]}")
    assert not found, "\n".join(found)


def test_no_two_classes_share_a_name():
    """A class name means one thing in the package (issue 47: there were two ``Dump``, two ``HeapObject`` and two
    ``Limits`` of different meaning): every public class defined at a module's top level, by its source."""
    seen: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                seen.setdefault(node.name, []).append(str(path.relative_to(PACKAGE)))
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}


#: what a command or the fleet may import: the model (the one door to a dump), what it renders with, and the
#: package's own plumbing; never the engine under the model (issue 47, item 1)
DOOR = {"model", "present", "errors", "limits", "util", "formats", "commands", "fleet", "live", "trim"}
ENGINE = {"heap", "objects", "graph", "session", "runtime", "types", "dump", "analyses", "native", "parallel"}


def test_commands_fleet_and_trim_reach_the_dump_only_through_the_model():
    """No module of ``commands/``, ``fleet/`` or ``trim/`` imports the engine (heap walks, objects, the graph, the
    session, the readers and writers below them): each opens a dump with ``clrlayout.model.open`` (``trim``: asks
    ``clrlayout.model.copies`` what a copy keeps, and to write it) and asks the model."""
    wrong = []
    for module, targets in _imports().items():
        parts = module.split(".")
        if len(parts) < 2 or parts[1] not in ("commands", "fleet", "trim"):
            continue
        for target in targets:
            top = target.split(".")[1] if "." in target else target
            assert top in DOOR | ENGINE | {"clrlayout", "__version__"}, target
            if top in ENGINE:
                wrong.append(f"{module} imports {target}")
    assert wrong == []
