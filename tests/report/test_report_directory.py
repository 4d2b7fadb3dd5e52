from geofed import records, report


def test_the_directory_sections_show_each_sync_its_refusals_and_the_scale_run(tmp_path):
    counts = {f"{op}_{kind}s": 0 for op in ("add", "modify", "delete") for kind in ("user", "group")}
    sync = records.make("directory.sync", {
        "dry_run": False, "incremental": False, "files": [], "sites": {"M": {"activated": 5, "groups": 4}}, "merged_users": 5, "merged_groups": 4,
        "counts": dict(counts, add_users=5), "changes": [], "errors": [], "seconds": {"total": 0.3},
        "collisions": [{"kind": "same-name", "entry": "user", "name": "hau", "detail": "activated at M and H",
                        "sources": ["M:uid=hau", "H:CN=hau"]}]}, federation="ma-hd")
    bench = records.make("directory.bench", {
        "users_per_site": 20000, "groups_per_site": 2000, "changed_fraction": 0.01, "servers_up_s": 1.0, "ok": True,
        "targets_s": {"first_floor_ratio": 2.0, "no_change": 3.0, "resync": 5.0},
        "floor": {"tool": "slapadd", "entries": 39600, "seconds": 4.5, "homes": {}},
        "runs": [{"run": "first sync", "seconds": {"read": 1, "merge": 2, "write": 3, "total": 6}, "changes": 39600,
                  "merged_users": 36000, "merged_groups": 4000, "collisions": [], "errors": []}]})
    for rec in (sync, bench):
        records.save(rec, tmp_path)
    report.render(records.load_dir(tmp_path), tmp_path)
    text = (tmp_path / "report.html").read_text()
    assert "User directory: syncs" in text and "+5 ~0 -0" in text and "same-name" in text and "H:CN=hau" in text
    assert "20000 users and 2000 groups per site" in text and "39600" in text and ": met" in text
    assert "first sync &lt; 2 &times; the floor (slapadd of 39600 entries in 4.50 s)" in text
