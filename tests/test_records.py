"""Typed records: every kind round-trips, what does not fit is refused in one line naming
the file, records of the previous geofed (schema 1) load, docs/records.md is the registry's."""

import json
from pathlib import Path

import pytest
from record_samples import FED, SAMPLES, record, sample

from geofed import records
from geofed.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_1 = Path(__file__).parent / "data" / "records-schema1"  # written by geofed before typed records


def test_every_kind_has_a_sample():
    assert set(SAMPLES) == set(records.KINDS)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_every_kind_round_trips_through_a_file(kind, tmp_path):
    made = record(kind)
    assert isinstance(made.data, records.KINDS[kind]) and made.version == records.KINDS[kind].VERSION
    path = records.save(made, tmp_path)
    (back,) = records.load_dir(tmp_path)
    assert back.kind == kind and back.data == made.data and back.meta == FED and back.path == str(path)
    assert json.loads(path.read_text())["data"] == json.loads(records.dumps(made))["data"]


def test_make_refuses_data_that_does_not_fit_its_kind():
    with pytest.raises(records.RecordError, match="bench.hpl version 2: missing field rows"):
        records.make("bench.hpl", {k: v for k, v in sample("bench.hpl").items() if k != "rows"})
    with pytest.raises(records.RecordError, match="testbed.verify version 1: host_cores: expected an integer, got str"):
        records.make("testbed.verify", sample("testbed.verify", host_cores="two"))
    with pytest.raises(records.RecordError, match="unknown field.*speed"):
        records.make("ops.transfer", sample("ops.transfer", speed=1))
    with pytest.raises(records.RecordError, match="bench.hpl version 2: params: ns: expected a list"):
        records.make("bench.hpl", sample("bench.hpl", params={"ns": 1000}))
    with pytest.raises(records.RecordError, match="unknown record kind 'future.thing'"):
        records.make("future.thing", {})


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("change,message", [
    ({"kind": "future.thing"}, "unknown record kind 'future.thing'"),
    ({"version": 99}, "bench.obstacle version 99 is newer than this geofed's"),
    ({"schema": 7}, "record schema 7"),
    ({"data": {"n": 32}}, "bench.obstacle version 1: missing field tol"),
])
def test_a_record_that_cannot_be_read_is_refused_in_one_line_naming_the_file(tmp_path, change, message):
    doc = json.loads(records.dumps(record("bench.obstacle"))) | change
    path = _write(tmp_path / "rec.json", doc)
    with pytest.raises(UserError, match=message) as e:
        records.load_paths([str(path)])
    assert str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value)
    # in a directory it is named as well, not skipped: it claims to be a geofed record
    with pytest.raises(UserError, match=message):
        records.load_dir(tmp_path)


def test_other_json_in_a_directory_is_skipped(tmp_path):
    records.save(record("bench.link"), tmp_path)
    _write(tmp_path / "unrelated.json", {"x": 1})
    (tmp_path / "broken.json").write_text("{")
    assert [r.kind for r in records.load_dir(tmp_path)] == ["bench.link"]
    with pytest.raises(UserError, match="unrelated.json: not a geofed record"):
        records.load_paths([str(tmp_path / "unrelated.json")])


def test_records_of_the_previous_geofed_load_as_version_1():
    recs = records.load_dir(SCHEMA_1)
    assert sorted(r.kind for r in recs) == ["bench.check", "bench.io", "bench.mpi", "directory.sync",
                                            "job.pingpong", "mdfs.run", "model.hpl.scaling"]
    mpi = next(r for r in recs if r.kind == "bench.mpi")
    assert mpi.data.results[0]["benchmark"] == "latency" and mpi.sanity().ok


def test_a_previous_hpl_record_is_upgraded_and_one_that_does_not_fit_names_its_version(tmp_path):
    data = sample("bench.hpl", ranks_per_node=2)
    data["params"] = {k: v for k, v in data["params"].items() if k != "ranks_per_node"}
    old = {"schema": 1, "kind": "bench.hpl", "created": "2026-11-25T10:00:00+00:00", "geofed_version": "0.1.0",
           "host": "vm", "meta": FED, "data": data}
    rec = records.read(_write(tmp_path / "old.json", old))
    assert rec.version == 2 and rec.data.params.ranks_per_node == 2 and rec.data.params.ns == (1000, 1500)
    old["kind"], old["data"] = "bench.obstacle", {"n": "32"}
    path = _write(tmp_path / "old.json", old)
    with pytest.raises(UserError, match=r"old.json: bench.obstacle version 1: n: expected an integer, got str "
                                        r"\(written by geofed 0.1.0\)"):
        records.load_paths([str(path)])


def test_sanity_is_one_verdict_for_every_kind():
    assert records.sanity_of([record("bench.hpl"), record("bench.btio"), record("bench.link")]).ok
    bad = sample("bench.hpl")
    bad["rows"][1]["passed"], bad["passed"] = False, False
    verdict = records.sanity_of([record("bench.hpl", **bad), record("bench.btio", files_identical=False)])
    assert not verdict.ok
    assert "bench.hpl: residual check FAILED at N = 1500" in verdict.why
    assert "bench.btio: simple and full files differ" in verdict.why
    assert record("bench.link").sanity() is None  # no correctness notion: nothing to AND


def test_a_workload_passes_its_records_failed_verdict_on():
    from geofed.workloads import Workload
    failed = record("bench.btio", verified=False)
    assert Workload().sanity(failed) == records.Sanity(False, "a run read back wrong data")
    assert Workload().sanity(record("bench.link")).ok  # nothing to check


def test_docs_records_md_is_generated_from_the_registry():
    assert (ROOT / "docs" / "records.md").read_text() == records.reference(), \
        "regenerate docs/records.md (its head says how)"
    for kind, cls in records.KINDS.items():
        assert f"## `{kind}` (version {cls.VERSION})" in records.reference()


def test_a_kind_whose_fields_and_attribute_lines_differ_is_refused_at_import():
    with pytest.raises(RuntimeError, match=r"fields \['rows'\] have no line under Attributes, lines \['gone'\]"):
        @records.kind("test.undocumented")
        class Undocumented:
            """A kind that forgot a field.

            Attributes:
                seconds: how long
                gone: a field that was removed
            """
            seconds: float
            rows: list
    assert "test.undocumented" not in records.KINDS
    assert records.KINDS["bench.mpi"].FIELD_DOCS["mpi_library"] == "MPI library version line"  # from its base
