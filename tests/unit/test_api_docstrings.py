"""The API reference (docs/api-reference.md, made by mkdocstrings) documents every parameter: each public function
and method with parameters, of the model's modules it shows, has a docstring with an ``Args:`` section naming
each of them (issue 47, item 6)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _documented_modules() -> list[Path]:
    text = (ROOT / "docs" / "api-reference.md").read_text(encoding="utf-8")
    names = re.findall(r"^::: (clrlayout\.model\.\w+)$", text, re.M)
    assert len(names) >= 5
    return [ROOT / (name.replace(".", "/") + ".py") for name in names]


def _public_functions(tree: ast.Module):
    """Module-level functions and methods of classes (not nested helpers), without a leading underscore."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                    yield f"{node.name}.{item.name}", item


def test_every_parameter_of_the_api_is_documented():
    missing = []
    for path in _documented_modules():
        for name, node in _public_functions(ast.parse(path.read_text(encoding="utf-8"))):
            params = [a.arg for a in node.args.args + node.args.kwonlyargs if a.arg not in ("self", "cls")]
            if node.args.vararg:
                params.append("*" + node.args.vararg.arg)
            doc = ast.get_docstring(node) or ""
            args = doc.split("Args:", 1)[1] if "Args:" in doc else ""
            lacking = [p for p in params if not re.search(rf"^\s+{re.escape(p)}:", args, re.M)]
            if lacking:
                missing.append(f"{path.name}: {name} ({', '.join(lacking)})")
    assert missing == []
