"""trim --redact on fresh dumps of a process with planted secrets (sample_dumps/targets/secrets): strings (ASCII
and not), a byte array, a char array, primitive fields and a boxed value on the heap, copies in native memory and
on the stack.  After --redact none of them is anywhere in the file, as UTF-16LE or UTF-8, and every structural
answer is the original's; with --keep-stacks the stack copies stay (and only they)."""

from __future__ import annotations

import json

import pytest

from clrlayout.trim import trim
from tests.support.redaction import json_of, managed_retained, structure
from tests.support.scripts import script

pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module", params=["3.1.23", "8.0.4", "10.0.0"])
def secrets_core(request, target_build, tmp_path_factory):
    """A full core (every mapping: the native heap's copies too) of the secrets target, and its truth."""
    make_dumps, runtimes = script("make_dumps"), script("runtimes")
    core, truth = make_dumps.make_linux(target_build, tmp_path_factory.mktemp("secrets"),
                                        runtime=runtimes.get(request.param), target="secrets", full=True)
    return core, json.loads(truth.read_text(encoding="utf-8"))


def test_no_secret_is_left(secrets_core, tmp_path):
    core, truth = secrets_core
    secrets = [bytes.fromhex(s) for s in truth["secrets"]]
    original = core.read_bytes()
    assert all(s in original for s in secrets)  # planted: each is in the dump as made
    assert sum(original.count(s) for s in secrets[:6]) > 12  # ... and the strings' copies beside the heap's
    out = tmp_path / "redacted.core"
    report = trim(str(core), str(out), redact=True).redacted
    assert report.objects > 1000
    data = out.read_bytes()
    assert [s.hex() for s in secrets if s in data] == []


def test_keep_stacks_keeps_the_stack_copies(secrets_core, tmp_path):
    core, truth = secrets_core
    out = tmp_path / "stacks.core"
    trim(str(core), str(out), redact=True, keep_stacks=True)
    data = out.read_bytes()
    for value in truth["on_stack"]:
        assert bytes.fromhex(value) in data


def test_structure_is_the_originals(secrets_core, tmp_path, capsys):
    core, _ = secrets_core
    out = tmp_path / "redacted.core"
    trim(str(core), str(out), redact=True)
    original, redacted = structure(capsys, core), structure(capsys, out)
    differs = {k: [(f, original[k][f], redacted[k].get(f)) for f in original[k] if original[k][f] != redacted[k].get(f)]
               if isinstance(original[k], dict) and isinstance(redacted.get(k), dict) else (str(original[k])[:300],)
               for k in original if original[k] != redacted.get(k)}
    assert not differs
    retained = [managed_retained(json_of(capsys, "retained", path, "--roots", "handles,finalizer", "--top", "200",
                                         "--format", "json")) for path in (core, out)]
    assert retained[0] == retained[1] and retained[0]["live_objects"] > 100
