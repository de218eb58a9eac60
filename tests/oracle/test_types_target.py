"""Field layouts against what the runtime's reflection says: the types target (sample_dumps/targets/types)
allocates BCL types, classes and structs of its own (padding, embedded structs, explicit layout,
inheritance, generics, enums, every primitive, every kind of array) and classes made with
Reflection.Emit, and writes each object's address, MethodTable, ``Type.ToString()`` and every instance
field's declaring type, declared type, token and value (``FieldInfo.GetValue``).  A core of it is made on
2.2.5, 3.1.23, 8.0.4 and 10.0.0, and the Windows x64 samples of it (3.1.23, 8.0.4: the Windows EEClass layout
of 3.0-8) are checked the same way; every object's layout from the dump must say the same."""

from __future__ import annotations

import struct

import clrlayout
from clrlayout.objects.instances import instance_layout
from clrlayout.session import open_session  # the engine under the model: its plumbing too

DYNAMIC = "Emitted."  # the types the target makes with Reflection.Emit: no image to name them from


def _expected(fields, path=()):
    """(token path, truth field, value) of every field, a struct's fields under the struct's token."""
    for f in fields:
        p = path + (f["token"],)
        if isinstance(f["value"], dict):
            yield from _expected(f["value"]["fields"], p)
        else:
            yield p, f, f["value"]


def _same(ours: str | None, want, size: int) -> bool:
    if want is None:
        return ours == "null"
    if ours is None:
        return False
    if want.startswith("0x"):  # a reference or a pointer: the address, then what is there
        return ours.split(" ")[0] == want
    if want.startswith("U+"):
        return ours.endswith(f"(U+{want[2:]})") or ours == want
    if want.startswith("bits:"):  # floats: the exact bits
        return struct.pack("<f" if size == 4 else "<d", float(ours)) == int(want[5:], 16).to_bytes(size, "little")
    return ours == want


def _layout_of(s, address: int, method_table: int):
    mt = s.mts.get(method_table)
    ptr, h = s.profile.pointer_size, s.profile.object.header_size
    count = s.dump.memory.read_u32(address + ptr) if mt.component_size else 0
    size = mt.object_size(count)
    aligned = max(s.profile.align(size), s.profile.object.min_object_size)
    element = s.array_element(method_table) if mt.component_size else None
    return instance_layout(s.profile, s.type_layout(method_table), address, s.dump.memory.read(address - h, aligned),
                           size, aligned, count, element, s.referent, max_elements=16)


def test_every_field_equals_reflection(types_core):
    truth = types_core.truth
    checked = values = 0
    with open_session(types_core.path) as s:
        s.method_tables_named("System.String")  # learn the heap's types
        for o in truth["objects"]:
            address, method_table = int(o["address"], 16), int(o["method_table"], 16)
            word = s.dump.memory.read_pointer(address) & ~s.profile.object.method_table_unmask
            assert word == method_table, f"{o['type']} moved before the dump"
            dynamic = o["type"].startswith(DYNAMIC)
            # names as reflection prints them; a type without an image has none, never a wrong one
            assert s.names.reflection_name(method_table) == (None if dynamic else o["type"])
            layout = s.type_layout(method_table)
            assert layout.complete, (o["type"], layout.problems)
            rows = {r.path: r for r in _layout_of(s, address, method_table).rows if r.path}
            if "elements" in o:
                assert rows, o["type"]
                for i, v in enumerate(o["elements"]):
                    nested = _expected(v["fields"], (f"[{i}]",)) if isinstance(v, dict) else [((f"[{i}]",), None, v)]
                    for path, _, want in nested:
                        r = rows[path]
                        assert _same(r.value, want, r.size), (o["type"], path, want, r.value)
                        values += 1
                checked += 1
                continue
            fields = {(f.token, f.inherited): f for f in layout.fields}
            for path, f, want in _expected(o["fields"]):
                if len(path) > 1 and dynamic and path[:1] in rows and rows[path[:1]].role == "struct" \
                        and path not in rows:
                    continue  # a struct field of an emitted type: no signature to find its MethodTable from
                r = rows[path]
                if want != "?":
                    assert _same(r.value, want, r.size), (o["type"], f["name"], want, r.value)
                    values += 1
                if len(path) == 1 and not dynamic:
                    ours = fields[(f["token"], f["declaring_type"] != o["type"])]
                    assert (ours.name, ours.reflection_type, ours.reflection_declaring_type) == \
                        (f["name"], f["type"], f["declaring_type"])
                    # shown as the DAC names types: the declaring type as its MethodTable's name, and the
                    # declared type so too when it is the form of a struct's MethodTable
                    assert ours.declaring_type in {s.type_name(m) for m in [method_table, *layout.parents]}
                    if ours.field_method_table and "__Canon" not in (s.type_name(ours.field_method_table) or ""):
                        assert ours.type == s.type_name(ours.field_method_table)
                    if "`" in f["type"]:
                        assert "[[" in ours.type and ", " in ours.type, ours.type
            checked += 1
    assert checked == len(truth["objects"]) and values > 150


def test_object_at_any_address_inside_it(types_core):
    """object_at (the `object` command): every address of an object, header to padding, names that object."""
    with open_session(types_core.path) as s:
        h = s.profile.object.header_size
        for o in types_core.truth["objects"]:
            address = int(o["address"], 16)
            first = s.object_at(address)
            assert first is not None and first.address == address, o["type"]
            for probe in (address - h, address + first.aligned_size - h - 1):
                assert s.object_at(probe).address == address, (o["type"], hex(probe))
            after = s.object_at(address + first.aligned_size - h)
            assert after is None or after.address == address + first.aligned_size


def test_type_dump_and_object_commands(types_core, capsys):
    """type, dump --type and object on the target's own class: the fields reflection lists, in offset order
    without overlap inside BaseSize; the object listed where the target put it; an interior address found."""
    import json

    from clrlayout.cli import main

    truth = {o["type"]: o for o in types_core.truth["objects"]}
    padded = truth["Derived"]
    assert main(["type", str(types_core.path), "Derived", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    t = json.loads(out)
    assert t["method_table"] == padded["method_table"] and t["parents"][:2] == ["Padded", "System.Object"]
    with open_session(types_core.path) as s:
        lay = s.type_layout(int(t["method_table"], 16))
    assert [(f["name"], f["type"], f["declaring_type"]) for f in t["fields"]] == \
        [(f.name, f.type, f.declaring_type) for f in lay.fields]
    assert {(f.name, f.reflection_type, f.reflection_declaring_type) for f in lay.fields} == \
        {(f["name"], f["type"], f["declaring_type"]) for f in padded["fields"]}
    ptr = types_core.truth["pointer_size"]
    end = ptr
    for f in t["fields"]:
        assert f["offset"] >= end
        end = f["offset"] + f["size"]
    assert end <= t["base_size"] - (8 if ptr == 8 else 4)
    assert main(["dump", str(types_core.path), "--type", "Derived", "--format", "jsonl"]) == 0
    out, _ = capsys.readouterr()
    listed = [json.loads(line) for line in out.splitlines()]
    assert [r["address"] for r in listed] == [padded["address"]] and listed[0]["type"] == "Derived"
    long_field = next(f for f in t["fields"] if f["name"] == "L")
    inside = int(padded["address"], 16) + long_field["offset"] + 3
    assert main(["object", str(types_core.path), hex(inside), "--format", "jsonl"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["object"]["address"] == padded["address"] and got["in"] == "L (from Padded)"
    assert got["offset"] == long_field["offset"] + 3
    # Padded has an object of its own; System.ValueType is on the heap only as the parent of structs
    assert main(["dump", str(types_core.path), "--type", "System.ValueType"]) == 4
    err = capsys.readouterr().err
    assert "no object of this type on the heap" in err and err.count("\n") == 1


def test_damaged_type_structures(types_core, tmp_path, capsys):
    """EEClasses, FieldDescs and MethodTables of the target's types overwritten with random bytes: type, dump
    --type --layout, object and stats still end with exit 0 or a documented error, one line each, never a
    traceback or a hang."""
    import random
    import shutil

    from tests.support.guards import ALLOWED, hang_guard

    from clrlayout.cli import main

    targets = []
    with open_session(types_core.path) as s:
        s.method_tables_named("System.String")
        for o in types_core.truth["objects"]:
            mt = int(o["method_table"], 16)
            c = s.layouts.class_data(mt)
            spots = [mt, mt + 8, mt + 0x28]
            if c.data is not None:
                spots += [c.data.address + k for k in range(0, 0x40, 4)] + [c.data.field_desc_list + 4 * k for k in range(8)]
            for a in spots:
                r = s.dump.memory.region_at(a)
                if r is not None:
                    targets.append(r.offset + (a - r.start))
    assert len(targets) > 100
    inside = hex(int(types_core.truth["objects"][10]["address"], 16) + 9)
    path = tmp_path / "damaged.core"
    shutil.copy(types_core.path, path)  # one copy, damaged by each seed in turn and then mended
    for seed in range(6):
        rng = random.Random(seed)
        spots = rng.sample(targets, 40)
        with open(path, "r+b") as f:
            kept = []
            for at in spots:
                f.seek(at)
                kept.append(f.read(4))
            for at in spots:
                f.seek(at)
                f.write(bytes([rng.randrange(256) for _ in range(4)]))
        for args in (["type", str(path), "WithStructs"], ["type", str(path), "Derived", "--format", "json"],
                     ["dump", str(path), "--type", "Padded", "--layout"], ["object", str(path), inside],
                     ["dump", str(path), "--type", "System.Int32[,]", "--layout", "--format", "jsonl"],
                     ["stats", str(path)]):
            with hang_guard():
                code = main(args + ["-q"])
            _, err = capsys.readouterr()
            assert code in ALLOWED and "Traceback" not in err, (seed, args[0], code, err)
            assert all(line.startswith("clrlayout: ") for line in err.splitlines()), err
        with open(path, "r+b") as f:
            for at, was in zip(spots, kept):  # each read before any was written: the original bytes
                f.seek(at)
                f.write(was)


def test_mt_selects_the_objects_of_any_method_table(types_core, capsys):
    """--mt as SOS's -mt: `dump --mt` lists the objects of that MethodTable (the same lines as --type with
    its name), `stats --mt` keeps its row; String's MethodTable still lists strings; a MethodTable the dump
    does not hold is exit 4."""
    import json

    from clrlayout.cli import main

    path = str(types_core.path)
    assert main(["stats", path, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["types"]
    row = next(r for r in rows if r["name"] == "System.Object[]")  # the target keeps several
    assert row["count"] >= 2
    assert main(["dump", path, "--mt", row["method_table"], "--format", "jsonl"]) == 0
    by_mt = capsys.readouterr().out
    assert main(["dump", path, "--type", "System.Object[]", "--format", "jsonl"]) == 0
    assert by_mt == capsys.readouterr().out and by_mt.count("\n") == row["count"]
    assert {json.loads(line)["method_table"] for line in by_mt.splitlines()} == {row["method_table"]}
    assert main(["stats", path, "--mt", row["method_table"], "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["types"] == [row]
    string = next(r for r in rows if r["name"] == "System.String")
    assert main(["dump", path, "--mt", string["method_table"], "--format", "jsonl"]) == 0
    assert capsys.readouterr().out.count("\n") == string["count"]
    for command in ("dump", "stats"):
        assert main([command, path, "--mt", "0x10"]) == 4
        err = capsys.readouterr().err
        assert "--mt 0x10: no MethodTable in the dump there" in err and err.count("\n") == 1


def test_sample_fields_equal_reflection(types_sample):
    """The Windows x64 EEClass layouts (formats/type-system.toml), on real minidumps: every field of every
    object the target made equals what reflection said, names included."""
    test_every_field_equals_reflection(types_sample)
    test_object_at_any_address_inside_it(types_sample)


def test_struct_fields_have_the_dacs_method_tables(types_core):
    """Every value-type field of the heap's types whose MethodTable the DAC knows (``GetFieldDescData``'s
    ``MTOfType``: the loaded type) has the MethodTable clrlayout finds, instantiations of generic structs that
    no object shows included (``Nullable<int>``, ``KeyValuePair<int, string>``: found in the loader heaps)."""
    listing = types_core.dac_listing("--names", "--fields")
    compared, generic = 0, set()
    with open_session(types_core.path) as s:
        s.method_tables_named("System.String")
        for key, dac in listing["fields"].items():
            mt = int(key)
            if s.names.name(mt) is None:  # an emitted type: no metadata to read its fields' signatures from
                continue
            fields = {f.token: f for f in s.type_layout(mt).fields}
            for f in dac:
                if f["type"] != 0x11 or f["static"] or not f["field_mt"] or f["token"] not in fields:
                    continue
                ours = fields[f["token"]]
                assert ours.field_method_table == f["field_mt"], (listing["names"][key], ours.name, ours.type)
                compared += 1
                if "`" in ours.reflection_type:
                    generic.add(ours.reflection_type)
    # the DACs of 8 and 10 know every value-type field of WithGenericStructs (those of 2.2 and 3.1 hosted here
    # name the target's own types "<Unloaded Type>" and list no fields for them); all runtimes know
    # FileStream's Nullable<bool> (on 2.2 precompiled in CoreLib's NGEN image)
    own = int(types_core.runtime.split(".")[0]) >= 5
    assert compared >= (10 if own else 1), compared
    assert "System.Nullable`1[System.Boolean]" in generic or own
    assert not own or {"System.Nullable`1[System.Int32]", "System.Nullable`1[Inner]",
                        "System.Collections.Generic.KeyValuePair`2[System.Int32,System.String]"} <= generic, generic


def test_trim_types_keeps_every_layout(types_core, tmp_path, capsys):
    """``trim --types`` keeps what naming and laying out every heap type reads, fields of generic structs no
    object shows included (the MethodTables found in the loader heaps, and the records that find those heaps
    again, not the memory searched): ``type`` of every object's type says the same on the trimmed dump, a
    small part of the original."""
    from clrlayout.cli import main

    out = tmp_path / "trimmed.core"
    assert main(["trim", str(types_core.path), str(out), "--types"]) == 0
    capsys.readouterr()
    # a small part: 6.1 MB of a 58.5 MB core on 2.2.5 (the smallest runtime; its raw core's size varies with when
    # the runtime's GC last ran), under a tenth on the others
    assert out.stat().st_size * 8 < types_core.path.stat().st_size, (out.stat().st_size, types_core.path.stat().st_size)
    # what `type MT --format json` prints, of each dump opened once (not once per type: a run of `type` on the
    # trimmed dump shows it is the command's answer)
    from clrlayout.model.lookup import method_tables_for
    from clrlayout.model.typeview import type_view
    from clrlayout.present import typelayout
    from clrlayout.present.results import render

    wanted = [o for o in types_core.truth["objects"] if not o["type"].startswith(DYNAMIC)]
    said = []
    for path in (types_core.path, out):
        with clrlayout.open(str(path)) as dump:
            said.append([["\n".join(render(typelayout.result(type_view(dump, mt)), "json"))
                          for mt in method_tables_for(dump, o["method_table"], int(o["method_table"], 16))]
                         for o in wanted])
    for o, before, after in zip(wanted, *said):
        assert before == after and before, o["type"]
    assert len(wanted) >= 30
    assert main(["type", str(out), wanted[0]["method_table"], "--format", "json"]) == 0
    assert capsys.readouterr().out == "\n".join(said[1][0]) + "\n"
