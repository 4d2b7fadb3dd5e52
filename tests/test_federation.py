import pytest

from geofed import federation
from geofed.errors import UserError
from geofed.federation import bdp_bytes, fibre_one_way_ms

LINK = '[[link]]\nsites = ["W", "G"]\nfibre_km = 1\nbandwidth_gbps = 1\n'
BASE = """
name = "t"
[[site]]
code = "W"
nodes = 2
[[site]]
code = "G"
nodes = 1
"""


def test_light_in_fibre_gives_seed_000s_round_trip():
    # seed 000, eq. 1: 2 x 900 km / 200 km/ms = 9 ms
    assert 2 * fibre_one_way_ms(900) == pytest.approx(9.0)


def test_seed_001_latency_is_transit_plus_local(write_fed):
    fed = federation.load(write_fed(BASE + '[local]\nlatency_us = 2\n[[link]]\nsites = ["W", "G"]\nfibre_km = 28.6\nbandwidth_gbps = 7.44\n'))
    link = fed.links[0]
    assert link.propagation_ms * 1e3 == pytest.approx(143.0)
    assert link.one_way_ms * 1e3 == pytest.approx(145.0)
    assert fed.one_way_ms("W", "G") * 1e3 == pytest.approx(145.0)
    assert fed.one_way_ms("W", "W") * 1e3 == pytest.approx(2.0)


def test_bdp():
    assert bdp_bytes(40, 9.0) == 45_000_000
    assert bdp_bytes(1, 1) == 125_000


def test_rtt_given_sets_the_delay_and_default_queue_is_one_bdp(write_fed):
    fed = federation.load(write_fed(BASE + '[local]\nlatency_us = 0\n[[link]]\nsites = ["W", "G"]\nrtt_ms = 20\nbandwidth_gbps = 10\n'))
    link = fed.links[0]
    assert link.rtt_ms == pytest.approx(20)
    assert link.fibre_km is None
    assert link.queue_bytes == link.bdp_bytes == 25_000_000


def test_short_link_queue_holds_at_least_a_few_gso_frames(write_fed):
    fed = federation.load(write_fed(BASE + '[[link]]\nsites = ["W", "G"]\nfibre_km = 1\nbandwidth_gbps = 1\n'))
    assert fed.links[0].queue_bytes == federation.MIN_QUEUE_BYTES


@pytest.mark.parametrize("name", ["icm-task", "ma-hd", "single-site"])
def test_shipped_federations_load(name):
    fed = federation.load(name)
    assert fed.name == name
    assert fed.storage in [s.code for s in fed.sites]
    assert len(fed.sha256) == 64


def test_icm_task_matches_seed_000():
    fed = federation.load("icm-task")
    assert [s.code for s in fed.sites] == ["W", "G"]
    assert fed.links[0].rtt_ms == pytest.approx(9.0, rel=0.001)
    assert fed.site("G").speed < fed.site("W").speed  # TASK was slower (Table 1)
    assert fed.storage == "W"
    assert "bandwidth" in fed.scale  # the scale factor is written in the file


def test_route_prefers_the_lower_latency_path(write_fed):
    text = """
name = "three"
[[site]]
code = "A"
nodes = 1
[[site]]
code = "B"
nodes = 1
[[site]]
code = "C"
nodes = 1
[[link]]
sites = ["A", "B"]
fibre_km = 100
bandwidth_gbps = 10
[[link]]
sites = ["B", "C"]
fibre_km = 100
bandwidth_gbps = 1
"""
    fed = federation.load(write_fed(text))
    assert [l.name for l in fed.route("A", "C")] == ["A-B", "B-C"]
    assert fed.bandwidth_gbps("A", "C") == 1
    assert fed.one_way_ms("A", "C") == pytest.approx(fed.links[0].one_way_ms + fed.links[1].one_way_ms)


CREDIT_LINK = '[local]\nlatency_us = 2\n[[link]]\nsites = ["W", "G"]\nfibre_km = 28.6\nbandwidth_gbps = 1.86\n'

ERRORS = [
    ("name = \"t\"\n[[site\n", "invalid TOML"),
    ('name = "T T"\n[[site]]\ncode = "W"\nnodes = 1\n', "name: must be"),
    ('name = "t"\n', "site: at least one"),
    ('name = "t"\n[[site]]\ncode = "W"\nnodes = 0\n', "site[0].nodes: must be at least 1"),
    ('name = "t"\n[[site]]\ncode = "W"\nnodes = 1.5\n', "site[0].nodes: must be an integer"),
    ('name = "t"\n[[site]]\ncode = "W"\nnodes = true\n', "site[0].nodes: must be an integer"),
    ('name = "t"\n[[site]]\ncode = "w"\nnodes = 1\n', "site[0].code: must be one capital letter"),
    ('name = "t"\n[[site]]\ncode = "W"\nnodes = 1\nspeed = -1\n', "site[0].speed: must be positive"),
    ('name = "t"\n[[site]]\ncode = "W"\nnodes = 1\nnodez = 1\n', "site[0].nodez: unknown key"),
    ('name = "t"\n[[site]]\ncode = "W"\nnodes = 1\n[[site]]\ncode = "W"\nnodes = 1\n', "site[1].code: duplicate"),
    (BASE + '[[link]]\nsites = ["W", "X"]\nfibre_km = 1\nbandwidth_gbps = 1\n', "link[0].sites: unknown site 'X'"),
    (BASE + '[[link]]\nsites = ["W", "W"]\nfibre_km = 1\nbandwidth_gbps = 1\n', "link[0].sites: a link joins two different"),
    (BASE + '[[link]]\nsites = ["W", "G"]\nfibre_km = 1\nbandwidth_gbps = -4\n', "link[0].bandwidth_gbps: must be positive"),
    (BASE + '[[link]]\nsites = ["W", "G"]\nbandwidth_gbps = 1\n', "link[0]: needs fibre_km or rtt_ms"),
    (BASE + '[[link]]\nsites = ["W", "G"]\nfibre_km = 900\nrtt_ms = 1\nbandwidth_gbps = 1\n', "faster than light"),
    (BASE + '[[link]]\nsites = ["W", "G"]\nfibre_km = 1\nbandwidth_gbps = 1\nloss = 1.0\n', "link[0].loss: must be below 1"),
    (BASE + '[[link]]\nsites = ["W", "G"]\nfibre_km = 1\nbandwidth_gbps = 1\nqueue_bytes = 100\n', "link[0].queue_bytes"),
    (BASE + '[[link]]\nsites = ["W", "G"]\nfibre_km = 1\nbandwidth_gbps = 1\n[[link]]\nsites = ["G", "W"]\nfibre_km = 1\nbandwidth_gbps = 1\n', "link[1].sites: a second link"),
    (BASE, "site G is not joined"),
    (BASE + 'storage = "Q"\n', "unknown key"),  # storage after a table belongs to the table
    ('name = "t"\nstorage = "Q"\n[[site]]\ncode = "W"\nnodes = 1\n', "storage: unknown site 'Q'"),
    (BASE + '[[link]]\nsites = ["W", "G"]\nrtt_ms = 2\nbandwidth_gbps = 1\n[link.back]\nfibre_km = 300\n',
     "link[0].back.fibre_km: needs the link's own fibre_km"),
    (BASE + '[[link]]\nsites = ["W", "G"]\nfibre_km = 1\nbandwidth_gbps = 1\n[link.back]\nrtt_ms = 3\n', "link[0].back.rtt_ms: unknown key"),
    (BASE + '[[link]]\nsites = ["W", "G"]\nfibre_km = 1\nbandwidth_gbps = 1\nback = 2\n', "link[0].back: must be a table"),
    (BASE + '[[link]]\nsites = ["W", "G"]\nfibre_km = 1\nbandwidth_gbps = 1\n[link.back]\nloss = 1\n', "link[0].back.loss: must be below 1"),
    (BASE + '[[link]]\nsites = ["W", "G"]\nfibre_km = 1\nbandwidth_gbps = 1\n[link.back]\nbandwidth_gbps = 0\n',
     "link[0].back.bandwidth_gbps: must be positive"),
    (BASE + CREDIT_LINK + 'flow = "credit"\n', 'link[0]: flow = "credit" needs credits_bytes or extender'),
    (BASE + CREDIT_LINK + 'flow = "credit"\ncredits_bytes = 100000\nextender = "longbow-40km"\n',
     'link[0]: flow = "credit" needs credits_bytes or extender (one of them)'),
    (BASE + CREDIT_LINK + 'flow = "credit"\ncredits_bytes = 100\n', "link[0].credits_bytes: must be at least 9000"),
    (BASE + CREDIT_LINK + 'flow = "credit"\ncredits_bytes = 1.5e5\n', "link[0].credits_bytes: must be an integer"),
    (BASE + CREDIT_LINK + 'credits_bytes = 100000\n', 'link[0].credits_bytes: only a credit link has one'),
    (BASE + CREDIT_LINK + 'flow = "queue"\nextender = "longbow-40km"\n', "link[0].extender: only a credit link"),
    (BASE + CREDIT_LINK + 'flow = "lossless"\n', 'link[0].flow: must be "queue"'),
    (BASE + CREDIT_LINK + 'extender = "longbow-1km"\n',
     "link[0].extender: unknown extender 'longbow-1km' (known: longbow-10km, longbow-40km, ibex-g40)"),
    (BASE + CREDIT_LINK + 'extender = "ibex-g40"\nloss = 0.001\n', "link[0].loss: a credit link is lossless"),
    (BASE + CREDIT_LINK + 'extender = "ibex-g40"\n[link.back]\nloss = 0.001\n', "link[0].back.loss: a credit link"),
    (BASE + LINK + '[scheduler]\nmax_span_slowdown_percent = -5\n', "scheduler.max_span_slowdown_percent: must be at least 0"),
    (BASE + LINK + '[scheduler]\nmax_slowdown = 5\n', "scheduler.max_slowdown: unknown key"),
]


def test_an_asymmetric_link_has_a_way_back_and_a_round_trip_of_both(write_fed, tmp_path):
    fed = federation.load(write_fed(BASE + '[local]\nlatency_us = 0\n[[link]]\nsites = ["W", "G"]\nfibre_km = 100\n'
                                    'bandwidth_gbps = 1\njitter_us = 5\n[link.back]\nfibre_km = 300\nbandwidth_gbps = 0.25\n'
                                    'loss = 0.01\n'))
    link = fed.links[0]
    there, back = link.way("W"), link.way("G")
    assert (there.propagation_ms, there.bandwidth_gbps, there.loss, there.jitter_us) == (0.5, 1.0, 0.0, 5.0)
    # The way back takes what it leaves out (jitter) from the way there; its queue is its own BDP.
    assert (back.propagation_ms, back.bandwidth_gbps, back.loss, back.jitter_us) == (1.5, 0.25, 0.01, 5.0)
    assert back.queue_bytes == max(bdp_bytes(0.25, 3.0), federation.MIN_QUEUE_BYTES)
    assert link.rtt_ms == fed.rtt_ms("G", "W") == pytest.approx(2.0)
    assert link.propagation_rtt_ms == pytest.approx(2.0)
    assert fed.one_way_ms("G", "W") == pytest.approx(1.5) and fed.bandwidth_gbps("G", "W") == 0.25
    with pytest.raises(KeyError):
        link.way("X")
    # A copy keeps the way back; a change applies to both ways.
    copy = federation.load(federation.derive(fed, tmp_path, "t-copy", loss=0.02)).links[0]
    assert copy.loss == copy.way("G").loss == 0.02
    assert copy.way("G").bandwidth_gbps == 0.25 and copy.way("G").propagation_ms == 1.5
    symmetric = federation.load(federation.derive(fed, tmp_path, "t-rtt", rtt_ms=4)).links[0]
    assert symmetric.way("G").propagation_ms == symmetric.propagation_ms == 2.0


def test_the_scheduler_lets_a_job_span_below_ten_percent_unless_the_file_says(write_fed):
    assert federation.load(write_fed(BASE + LINK)).max_span_slowdown == 0.10
    fed = federation.load(write_fed(BASE + LINK + '[scheduler]\nmax_span_slowdown_percent = 25\n'))
    assert fed.max_span_slowdown == 0.25


@pytest.mark.parametrize("text,message", ERRORS)
def test_errors_name_file_key_and_problem(write_fed, text, message):
    path = write_fed(text)
    with pytest.raises(UserError) as e:
        federation.load(path)
    assert str(path) in str(e.value)
    assert message in str(e.value)


def test_missing_file_lists_shipped_names():
    with pytest.raises(UserError, match="shipped: icm-task, ma-hd, ma-hd-seed, single-site"):
        federation.load("/nonexistent/fed.toml")


def test_derive_writes_a_valid_copy_under_another_name_with_link_changes(tmp_path):
    for shipped in federation.shipped_names():
        base = federation.load(shipped)
        copy = federation.load(federation.derive(base, tmp_path, f"copy-{shipped}", loss=0.01))
        assert copy.name == f"copy-{shipped}" and copy.path.parent == tmp_path
        assert copy.sites == base.sites and copy.storage == base.storage and copy.scale == base.scale
        assert [l.loss for l in copy.links] == [0.01] * len(base.links)
        assert [l.rtt_ms for l in copy.links] == [l.rtt_ms for l in base.links]
    shorter = federation.load(federation.derive(federation.load("icm-task"), tmp_path, "short", rtt_ms=0.3))
    assert shorter.links[0].rtt_ms == pytest.approx(0.3)


@pytest.mark.parametrize("name,changes,message", [
    ("Bad Name", {}, "federation name"), ("ok", {"colour": 1}, "unknown link setting"),
    ("ok", {"loss": float("nan")}, "loss")])
def test_derive_refuses_bad_names_and_values(tmp_path, name, changes, message):
    with pytest.raises(UserError, match=message):
        federation.derive(federation.load("icm-task"), tmp_path, name, **changes)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_numbers_are_refused_with_their_place(write_fed, value):
    text = federation.load("icm-task").path.read_text().replace("bandwidth_gbps = 4.0", f"bandwidth_gbps = {value}")
    with pytest.raises(UserError, match=r"link.*bandwidth_gbps.*finite"):
        federation.load(write_fed(text))


@pytest.mark.parametrize("km", [10, 40])
def test_an_extender_lends_its_licensed_distance_as_credits(write_fed, km):
    # Seed 001: a Longbow licensed for 40 km keeps 28 km full, one for 10 km does not.
    fed = federation.load(write_fed(BASE + CREDIT_LINK + f'extender = "longbow-{km}km"\n'))
    way = fed.links[0]
    assert way.credits_bytes == bdp_bytes(1.86, 2 * km / 200) and way.credit_rtt_ms == pytest.approx(0.286)
    # A credit is held for the fibre round trip and one 1514-byte frame on the wire.
    loop_s = 0.286e-3 + 1514 * 8 / 1.86e9
    assert fed.bandwidth_gbps("W", "G") == pytest.approx(min(1.86, way.credits_bytes * 8 / loop_s / 1e9))
    assert (fed.bandwidth_gbps("W", "G") < 0.4 * 1.86) == (km == 10)
    assert way.queue_bytes == federation.CREDIT_WAIT_BYTES
    assert way.way("G").credits_bytes == way.credits_bytes


def test_credits_given_in_bytes_follow_each_ways_rate(write_fed):
    fed = federation.load(write_fed(BASE + CREDIT_LINK + 'flow = "credit"\ncredits_bytes = 20000\n'
                                    'queue_bytes = 10000000\n[link.back]\nbandwidth_gbps = 0.1\n'))
    link = fed.links[0]
    assert link.extender is None and link.queue_bytes == 10_000_000
    assert fed.bandwidth_gbps("W", "G") == pytest.approx(20000 * 8 / (0.286e-3 + 1514 * 8 / 1.86e9) / 1e9)
    # 20 kB per round trip is more than 0.1 Gb/s needs: the rate holds the way back.
    assert fed.bandwidth_gbps("G", "W") == 0.1
    assert "W->G credits 0.02 MB" in federation.credit_summary(link)


# Nodes narrower than the fastest link; site S's fabric narrower still; an asymmetric link.
THREE_SITES = federation.to_toml({
    "name": "t3", "local": {"latency_us": 2, "bandwidth_gbps": 5},
    "site": [{"code": "M", "nodes": 2}, {"code": "S", "nodes": 1, "local": {"latency_us": 4, "bandwidth_gbps": 3}},
             {"code": "T", "nodes": 1}],
    "link": [{"sites": ["M", "S"], "rtt_ms": 1, "bandwidth_gbps": 10},
             {"sites": ["S", "T"], "rtt_ms": 2, "bandwidth_gbps": 4, "back": {"bandwidth_gbps": 2}}],
})


def test_a_path_inside_a_site_is_the_two_nodes_interfaces(write_fed):
    fed = federation.load(write_fed(THREE_SITES))
    path = fed.path_between("M", "M")
    assert [h.name for h in path.hops] == ["M node's interface out", "M node's interface in"]
    assert path.one_way_ms == pytest.approx(0.002) and path.bandwidth_gbps == 5 and path.ways == ()


def test_a_nodes_interface_narrower_than_the_link_sets_the_paths_bandwidth(write_fed):
    # The case: a 10 Gb/s link between nodes shaped to 5 Gb/s carries 5, not 10.
    fed = federation.load(write_fed(THREE_SITES))
    there = fed.path_between("M", "S")
    assert [h.gbps for h in there.hops] == [5, 10, 3]
    assert there.bandwidth_gbps == 3 and there.bottleneck.name == "S node's interface in"
    assert fed.bandwidth_gbps("S", "M") == 3 and fed.path_between("S", "M").bottleneck.name == "S node's interface out"
    # Half of each end's node-to-node latency, and the link's propagation.
    assert there.one_way_ms == pytest.approx(0.001 + fed.links[0].propagation_ms + 0.002)
    assert there.one_way_ms == pytest.approx(fed.links[0].one_way_ms)


def test_a_routed_path_crosses_every_link_each_way_and_the_transit_sites_fabric(write_fed):
    fed = federation.load(write_fed(THREE_SITES))
    there, back = fed.path_between("M", "T"), fed.path_between("T", "M")
    assert [h.name for h in there.hops] == ["M node's interface out", "link M-S", "S gateway in transit", "link S-T",
                                            "T node's interface in"]
    # The transit site is routed through, not sent from by a node: its fabric caps nothing.
    assert there.hops[2].gbps is None and there.hops[2].latency_ms == pytest.approx(0.004)
    assert there.bandwidth_gbps == 4 and back.bandwidth_gbps == 2 and back.bottleneck.name == "link S-T"
    assert there.one_way_ms == pytest.approx(sum(l.one_way_ms for l in fed.links))
    assert fed.rtt_ms("M", "T") == pytest.approx(there.one_way_ms + back.one_way_ms)


def test_a_credit_links_ceiling_is_a_hop(write_fed):
    fed = federation.load(write_fed(BASE + CREDIT_LINK + 'extender = "longbow-10km"\n'))
    path = fed.path_between("W", "G")
    assert path.bottleneck.name == "link W-G" and path.bandwidth_gbps == fed.links[0].ceiling_gbps < 1.86


def test_a_path_with_no_rate_anywhere_is_not_capped_and_loses_on_every_way(write_fed):
    fed = federation.load(write_fed(BASE + '[[link]]\nsites = ["W", "G"]\nfibre_km = 1\nbandwidth_gbps = 1\n'
                                    'loss = 0.01\n[link.back]\nloss = 0.02\n'))
    assert fed.path_between("W", "W").bandwidth_gbps is None and fed.path_between("W", "W").bottleneck is None
    assert fed.path_between("W", "G").loss == pytest.approx(0.01) and fed.path_between("G", "W").loss == pytest.approx(0.02)


def test_the_path_summary_names_the_narrowest_hop(write_fed):
    fed = federation.load(write_fed(THREE_SITES))
    line = federation.path_summary(fed, "T", "M")
    assert line.startswith("path T->M: T node's interface out + link S-T + S gateway in transit + link M-S")
    assert "2 Gb/s at link S-T" in line
