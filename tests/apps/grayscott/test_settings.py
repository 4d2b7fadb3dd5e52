"""The settings file: the tutorial's shape, defaults, and clear errors."""

import json

import pytest

from geofed.apps.grayscott import settings
from geofed.errors import UserError


def write(tmp_path, doc):
    p = tmp_path / "gs.json"
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def test_a_tutorial_file_loads_with_its_values(tmp_path):
    doc = {"L": 128, "Du": 0.2, "Dv": 0.1, "F": 0.02, "k": 0.048, "dt": 1.0, "plotgap": 10, "steps": 100,
           "noise": 0.1, "output": "gs.bp", "checkpoint": False, "checkpoint_freq": 70,
           "checkpoint_output": "ckpt.bp", "restart": False, "restart_input": "ckpt.bp",
           "adios_config": "adios2.xml", "adios_span": False, "adios_memory_selection": False, "mesh_type": "image"}
    s = settings.load(write(tmp_path, doc))
    assert (s.L, s.F, s.k, s.dt, s.steps, s.engine) == (128, 0.02, 0.048, 1.0, 100, "SST")
    assert s.output_steps() == list(range(10, 101, 10))
    assert s.warnings() == []


def test_defaults_are_the_issue_s():
    s = settings.Settings()
    assert (s.L, s.Du, s.Dv, s.F, s.k, s.dt, s.plotgap, s.steps, s.noise) == (64, 0.2, 0.1, 0.01, 0.05, 2.0, 10, 1000, 1e-7)


@pytest.mark.parametrize("doc, words", [
    ({"L": -4}, "L must be positive"),
    ({"L": 6.5}, "L must be an integer"),
    ({"dt": 0}, "dt must be positive"),
    ({"engine": "HDF9"}, "unknown engine 'HDF9'"),
    ({"Lx": 3}, "unknown key 'Lx'"),
    ({"restart": True}, "restart = true is not supported"),
    ({"noise": -1}, "noise must be at least 0"),
    ("{\"L\": 64,\n oops}", ":2: not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
])
def test_bad_settings_name_the_file_and_the_key(tmp_path, doc, words):
    p = write(tmp_path, doc)
    with pytest.raises(UserError) as e:
        settings.load(p)
    assert str(p) in str(e.value) and words in str(e.value)
    assert "\n" not in str(e.value)


def test_engine_names_are_case_insensitive(tmp_path):
    assert settings.load(write(tmp_path, {"engine": "sst"})).engine == "SST"
    assert settings.load(write(tmp_path, {"engine": "bp5"})).engine == "BP5"


def test_dt_beyond_euler_stability_warns(tmp_path):
    s = settings.load(write(tmp_path, {"dt": 5.0, "Du": 0.3}))
    assert any("stability limit" in w for w in s.warnings())
    assert settings.Settings(dt=4.0).warnings() == []  # 4 * (0.4 + 0.06) = 1.84 <= 2


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="cannot read settings"):
        settings.load(tmp_path / "nope.json")
