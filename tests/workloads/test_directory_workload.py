"""`bench directory` as a workload: its verdict is the record's check and the time targets."""

import copy

from record_samples import SAMPLES
from geofed import records
from geofed.workloads import directory


def test_syncs_as_expected_but_too_slow_fail_naming_the_times():
    data = copy.deepcopy(SAMPLES["directory.bench"])
    assert directory.WORKLOAD.sanity(records.make("directory.bench", data)).ok
    data["runs"][0]["seconds"] = dict(data["runs"][0]["seconds"], total=4.5)  # the sample's runs share one dict
    data["ok"] = False
    verdict = directory.WORKLOAD.sanity(records.make("directory.bench", data))
    assert not verdict.ok and "first sync 4.5 s = 3.00 x the floor (1.5 s)" in verdict.why
    assert "the targets are 2 x, 3 s and 5 s" in verdict.why


def test_an_unexpected_change_fails_whatever_the_times():
    data = copy.deepcopy(SAMPLES["directory.bench"])
    data["runs"][1]["changes"] = 3
    verdict = directory.WORKLOAD.sanity(records.make("directory.bench", data))
    assert not verdict.ok and "no change" in verdict.why
