"""Other makers' published single-file apps, as users dump them (issue 46 item 8): Microsoft's Sarif.Multitool
(.NET 8.0.30), the Azure MCP server (.NET 10.0.9) and the Fabric MCP server (.NET 10.0.5), from the npm registry
(tests/support/published.py).  Their assemblies are mapped from inside the executable at 16-byte-aligned
offsets, not copied to pages of their own: before this was read, 2 to 5 of their heap's types had a name."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.cli import run as run_cli

pytestmark = pytest.mark.oracle

APPS = ["sarif-multitool", "azure-mcp", "fabric-mcp"]


@pytest.fixture(scope="module", params=APPS)
def published(request, target_build, tmp_path_factory):
    from tests.support.published import dump_published

    raw, truth, version = dump_published(request.param, target_build, tmp_path_factory.mktemp(request.param))
    yield request.param, raw, truth, version, target_build
    raw.unlink()


def _outer(name: str) -> str:
    """A type's name without its type arguments and array ranks: the TypeDef it is made of."""
    name = name.split("[[", 1)[0]
    return re.sub(r"(\[,*\])+$", "", name)


def test_every_type_of_a_published_single_file_app_is_named(published, capsys):
    """Every type on the heap is named, without a warning, and each name is a type the app's bundled assemblies
    define (read by dnfile); the runtime's version is the one linked into the executable.  Sarif.Multitool runs
    the strings target as its startup hook: every string it wrote to its truth file is found at its address
    with its value and the runtime's String MethodTable (the MCP servers are trimmed: no hook runs in them)."""
    from tests.support.published import bundled_type_names, published_exe
    from tests.support.samples import units_to_str

    app, raw, truth, version, build = published
    code, stdout, stderr = run_cli(capsys, "info", str(raw), "--format", "json")
    info = json.loads(stdout)
    assert code == 0 and info["runtime"]["version"] == version
    assert info["runtime"]["module"]["size"] < 1 << 30  # the executable's own segments, not its bundle's mappings
    code, stdout, stderr = run_cli(capsys, "stats", str(raw), "--format", "json")
    assert code == 0 and stderr == ""
    rows = json.loads(stdout)["types"]
    unnamed = [r for r in rows if not r["name"] or r["name"].startswith("<unknown")]
    assert len(rows) > 100 and not unnamed, unnamed[:5]
    hook = (build / "strings.dll",) if truth is not None else ()
    defined = bundled_type_names(published_exe(app), also=hook) | {"Free"}
    assert {r["name"] for r in rows if _outer(r["name"]) not in defined} == set()
    strings = sum(r["count"] for r in rows if r["name"] == "System.String")
    assert strings > 900
    assert (truth is not None) == (app == "sarif-multitool")
    if truth is None:
        return
    written = json.loads(truth.read_text(encoding="utf-8"))
    code, stdout, _ = run_cli(capsys, "dump", str(raw), "--type", "System.String", "--format", "jsonl")
    found = {int(o["address"], 16): o for o in map(json.loads, stdout.splitlines())}
    assert code == 0 and len(found) == strings and len(written["strings"]) > 10
    for s in written["strings"]:
        got = found[int(s["address"], 16)]
        assert int(got["method_table"], 16) == int(written["string_method_table"], 16), s["name"]
        assert got["length"] == s["length"] and got["value"] == units_to_str(s["units"]), s["name"]
