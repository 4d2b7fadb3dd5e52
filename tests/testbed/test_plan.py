import ipaddress

from geofed import federation
from geofed.testbed.plan import CPU_PERIOD_US, make_plan, prefix


def test_every_name_carries_the_federation_prefix():
    plan = make_plan(federation.load("icm-task"))
    assert all(ns.startswith("geofed-icm-task.") for ns in plan.namespaces())
    assert len(plan.namespaces()) == 7 + 2 + 1  # nodes, sites, link
    assert plan.cgroup == "geofed/icm-task"
    assert plan.state_dir == "/run/geofed/icm-task"
    # No federation's prefix is the prefix of another's: names cannot contain dots.
    assert not prefix("icm-task").startswith(prefix("icm"))


def test_addresses_are_unique_and_in_the_benchmarking_range():
    plan = make_plan(federation.load("icm-task"))
    bench = ipaddress.ip_network("198.18.0.0/15")
    addrs = [n.address for n in plan.nodes] + [l.a_address for l in plan.links] + [l.b_address for l in plan.links]
    assert len(set(addrs)) == len(addrs)
    assert all(ipaddress.ip_address(a) in bench for a in addrs)
    for n in plan.nodes:
        assert ipaddress.ip_address(n.address) in ipaddress.ip_network(n.gateway + "/24", strict=False)


def test_sites_route_to_each_other_over_the_link():
    plan = make_plan(federation.load("icm-task"))
    w, g = plan.sites
    link = plan.links[0]
    assert w.routes == ((("198.18.2.0/24", link.b_address, link.a_port)),)
    assert g.routes == ((("198.18.1.0/24", link.a_address, link.b_port)),)


def test_cpu_share_follows_site_speed():
    fed = federation.load("icm-task")
    plan = make_plan(fed)
    w1, g1 = plan.node("W1"), plan.node("G1")
    assert w1.cpu_quota_us == round(fed.cpu_per_core * CPU_PERIOD_US)
    assert g1.cpu_quota_us / w1.cpu_quota_us == fed.site("G").speed


def test_hosts_file_resolves_node_names_and_the_host_to_the_node():
    plan = make_plan(federation.load("single-site"))
    text = plan.hosts_file(plan.node("L2"), "myhost")
    assert "198.18.1.3 L3" in text.splitlines()
    assert "198.18.1.2 myhost" in text.splitlines()
