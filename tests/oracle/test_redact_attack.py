"""``trim --redact`` as an attacker checks it (issue 45): the markers target (sample_dumps/targets/markers) on .NET 8
and 10, dumped in every way a Linux process is dumped — createdump's heap and full dumps, gdb's gcore, a kernel core
(``ulimit -c``, ``kill -QUIT``) and the core the runtime writes when the process dies of an unhandled exception
(``DOTNET_DbgEnableMiniDump``).  Every marker (tests/support/markers.py: about 50, in every place a secret can sit,
the code's literals, the command line and the environment among them) is in the dump as made; after --redact no
form of any, nor any 8-byte window of one, is anywhere in the file; and every structural answer is the original's,
the graph's with the roots the redacted dump still has."""

from __future__ import annotations

import json

import pytest

from clrlayout.trim import trim
from tests.support.markers import DUMP_KINDS, make_marked_dump, survivors
from tests.support.redaction import json_of, managed_retained, structure

pytestmark = pytest.mark.oracle

VERSIONS = ("8.0.4", "10.0.0")
#: what the redacted dump still has of the roots (its stacks are left out)
ROOTS = ("--roots", "handles,finalizer,statics")


@pytest.fixture(scope="module", params=[(v, k) for v in VERSIONS for k in DUMP_KINDS], ids=lambda p: f"{p[0]}-{p[1]}")
def marked(request, target_build, tmp_path_factory):
    dump = make_marked_dump(target_build, tmp_path_factory.mktemp("markers"), *request.param)
    out = dump.path.with_name(dump.path.stem + ".redacted" + dump.path.suffix)
    trim(str(dump.path), str(out), redact=True)
    yield dump, out
    dump.path.unlink()  # a gcore is half a gigabyte
    out.unlink()


def test_no_marker_survives(marked):
    dump, out = marked
    planted = survivors(dump.markers, dump.path.read_bytes())
    assert sorted(set(dump.markers) - set(planted)) == []  # each is in the dump as made
    assert survivors(dump.markers, out.read_bytes()) == {}


def test_structure_is_the_originals(marked, capsys, tmp_path):
    dump, out = marked
    original, redacted = structure(capsys, dump.path), structure(capsys, out)
    assert sorted(k for k in original if original[k] != redacted.get(k)) == []
    # each dump's graph built once and kept (an index answers as the walk does: tests/samples/test_index.py)
    graph = (*ROOTS, "--index", str(tmp_path / "index"))
    retained = [managed_retained(json_of(capsys, "retained", path, *graph, "--top", "50", "--format", "json"))
                for path in (dump.path, out)]
    copy = json.loads(json_of(capsys, "retained", out, *graph, "--top", "50", "--format", "json"))
    assert all("native_bytes" not in o for o in copy["objects"])  # no native heap in the copy: no figure of it
    assert retained[0] == retained[1] and retained[0]["live_objects"] > 100
    for obj in retained[0]["objects"][:3]:
        for command in ("refs", "roots"):
            assert json_of(capsys, command, out, obj["address"], *graph, "--format", "json") == \
                json_of(capsys, command, dump.path, obj["address"], *graph, "--format", "json")
