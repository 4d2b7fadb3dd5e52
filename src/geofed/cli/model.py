"""`geofed predict`, `geofed advise`, `geofed model calibrate|hpl`, `geofed bench model`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from geofed import federation, records
from geofed.cli import options
from geofed.cli.common import emit
from geofed.errors import UserError
from geofed.validate import positive_int, positive_int_list


def _federation(args):
    from geofed.model import whatif
    fed = federation.load(args.federation)
    return fed, whatif.apply(fed, args.what_if or [])


def _calibration(args, fed, model=None):
    """The calibration asked for or found; for a model that needs none, an empty one when there is none."""
    from geofed.model import calibration
    if args.calibration:
        return calibration.load(Path(args.calibration), fed)
    if model is not None and not model.needs_calibration:
        return calibration.found_or_empty(args.federation, fed)
    path = calibration.find(args.federation)
    if path.exists():
        return calibration.load(path, fed)
    # none yet: the first use calibrates from the demo's one-site runs
    found = calibration.fit_found(fed, args.federation, Path(options.DEMO_OUT))
    if found is None:
        from geofed.demo import DEMO_FEDERATION
        run = "`geofed demo`, which measures them there, or " if fed.name == DEMO_FEDERATION else ""
        raise UserError(f"no calibration of federation {fed.name} ({path}) and no one-site records of it in "
                        f"{options.DEMO_OUT}: run {run}`geofed model calibrate -f {args.federation} DIR` on a "
                        f"directory of records of its one-site runs (docs/model.md)")
    return found


def _common(p) -> None:
    options.federation(p, default=None)
    p.add_argument("--calibration", help="calibration file (default: next to the federation file)")
    p.add_argument("--what-if", action="append", metavar="KEY=VALUE",
                   help="change the federation first: link.bandwidth=10x, link.rtt_ms=1, link.fibre_km=2000, "
                        "link.loss=0.01, W.speed=2x, W.nodes=8 (repeatable)")
    p.add_argument("--json", action="store_true", help="print the prediction as JSON")


def _parts_line(pred) -> str:
    return "  ".join(f"{k} {v * 1e3:.3f} ms" for k, v in pred.parts.items() if v)


def cmd_predict(args) -> int:
    from geofed.launch.placement import parse
    from geofed.model import registry
    model = registry.get(args.workload)
    _, fed = _federation(args)
    nodes = parse(args.placement, fed).nodes(fed)  # a bad placement is named before a missing calibration
    cal = _calibration(args, fed, model)
    if args.workload.startswith("mpi-") and args.workload != "mpi-allreduce" and len(nodes) < 2:
        raise UserError(f"placement {args.placement}: {args.workload} needs two nodes")
    pred = model.predict(fed, cal, args.placement, nodes, model.params(args))
    if args.json:
        print(json.dumps(pred.as_dict() | {"calibration_notes": cal.notes}, indent=1))
        return 0
    interval = f" (interval {pred.interval[0] * 1e3:.3f} to {pred.interval[1] * 1e3:.3f})" if pred.interval else ""
    print(f"{args.workload} on {args.placement} ({fed.name}): {pred.total_s * 1e3:.3f} ms predicted{interval}")
    print(f"  {_parts_line(pred)}")
    if pred.link_bytes:
        print(f"  the link carries {pred.link_bytes / 1e6:.3f} MB")
    for note in (*pred.notes, *cal.notes):
        print(f"  note: {note}")
    return 0


def cmd_advise(args) -> int:
    from geofed.model import advise, registry
    model = registry.get(args.workload)
    _, fed = _federation(args)
    cal = _calibration(args, fed, model)
    params = model.params(args)
    nodes = args.nodes or model.nodes(params)
    if nodes is None:
        raise UserError(f"advise {args.workload}: --nodes is needed (how many nodes the job takes)")
    options = advise.rank(model, fed, cal, nodes, params)
    bw = advise.flip_factor(model, fed, cal, nodes, params, "bandwidth")
    km = advise.flip_factor(model, fed, cal, nodes, params, "fibre_km")
    if args.json:
        print(json.dumps({"options": [o.prediction.as_dict() for o in options], "flip_bandwidth_factor": bw,
                          "flip_distance_factor": km, "advice": advise.reason(options, bw, km)}, indent=1))
        return 0
    print(f"{args.workload} on {nodes} nodes of {fed.name}, fastest first:")
    print(f"{'placement':10} {'time [ms]':>11} {'compute':>9} {'local':>9} {'link':>9} {'staging':>9} {'link MB':>9}")
    for o in options:
        p = o.prediction.parts
        print(f"{o.placement:10} {o.prediction.total_s * 1e3:11.3f} {p['compute'] * 1e3:9.3f} "
              f"{p['local_comm'] * 1e3:9.3f} {p['link_comm'] * 1e3:9.3f} {p['staging'] * 1e3:9.3f} "
              f"{o.prediction.link_bytes / 1e6:9.3f}")
    print(f"advice: {advise.reason(options, bw, km)}")
    for note in cal.notes:
        print(f"note: {note}")
    return 0


def cmd_calibrate(args) -> int:
    from geofed.model import calibration
    fed = federation.load(args.federation)
    recs = records.load_paths(args.records)
    cal = calibration.fit(fed, recs)
    out = Path(args.output) if args.output else calibration.default_path(args.federation)
    cal.save(out)
    for site, consts in sorted(cal.sites.items()):
        print(f"site {site}: {', '.join(sorted(consts))}")
    print(f"calibration of {fed.name} from {len(cal.sources)} one-site record(s): {out}")
    return 0


def cmd_model_hpl(args) -> int:
    from geofed.model import hpl, whatif
    fed = federation.load(args.federation)
    if len(fed.sites) < 2:
        raise UserError(f"{fed.path}: one site only; the speed-up across a link needs two")
    cal = _calibration(args, fed)
    most = 2 * min(s.nodes for s in fed.sites[:2]) * args.ranks_per_node
    ranks = args.ranks or \
        [2 ** k * args.ranks_per_node for k in range(0, 64) if 2 ** k * args.ranks_per_node <= most]
    varies = args.vary or [f"link.bandwidth={f:g}x" for f in hpl.SEED_001_BANDWIDTH_GAINS]
    variants = [(v, whatif.apply(fed, [v])) for v in varies]  # every change named before any work
    rows = hpl.speedup_curve(fed, cal, args.n, args.nb, args.ranks_per_node, ranks)
    for v, changed in variants:
        for row, other in zip(rows, hpl.speedup_curve(changed, cal, args.n, args.nb, args.ranks_per_node, ranks)):
            if "two_sites" in row:
                row.setdefault("variants", {})[v] = {"speedup": other["two_sites"]["speedup"],
                                                     "gain": other["two_sites"]["speedup"] / row["two_sites"]["speedup"] - 1}
    a, b = fed.sites[0].code, fed.sites[1].code
    print(f"HPL speed-up T(1)/T(p), N = {args.n}, NB = {args.nb}, {args.ranks_per_node} rank(s) per node, {fed.name}: "
          f"one site ({a}) and split evenly ({a}+{b}) over {fed.links[0].name}")
    head = f"{'p':>6} {'one site':>9} {'two sites':>9} {'one/two':>8} {'p/ln p':>7} {'link [s]':>9}"
    print(head + "".join(f" {v:>20} {'gain':>6}" for v in varies))
    for r in rows:
        one, two = r.get("one_site"), r.get("two_sites")
        line = (f"{r['ranks']:>6} {_num(one and one['speedup'], 9)} {_num(two and two['speedup'], 9)} "
                f"{_num(one and two and one['speedup'] / two['speedup'], 8)} {r['kruse_bound']:7.1f} "
                f"{_num(two and two['parts']['link_comm'], 9)}")
        for v in varies:
            x = r.get("variants", {}).get(v)
            line += f" {_num(x and x['speedup'], 20)} {(format(x['gain'], '+6.0%') if x else '-'):>6}"
        print(line)
    seed = ", ".join(f"{f:g}x bandwidth {g:+.0%}" for f, g in hpl.SEED_001_BANDWIDTH_GAINS.items())
    print(f"seed 001 (slides 19-21, n_p = 40000): across the link the speed-up is about 4x lower for p > 256 "
          f"and stops growing beyond p = 500; the Kruse model gave {seed}")
    for note in cal.notes:
        print(f"note: {note}")
    rec = records.make("model.hpl.scaling", {"n": args.n, "nb": args.nb, "ranks_per_node": args.ranks_per_node,
                                             "sites": [a, b], "varies": varies, "rows": rows,
                                             "seed_001_bandwidth_gains": {f"{f:g}x": g for f, g in
                                                                          hpl.SEED_001_BANDWIDTH_GAINS.items()},
                                             "calibration": cal.sources},
                       **records.federation_meta(fed))
    emit(rec, args.out)
    return 0


def _num(x, width: int) -> str:
    return f"{x:>{width}.4g}" if x is not None else f"{'-':>{width}}"


def cmd_bench_model(args) -> int:
    from geofed.model import calibration, validate
    fed = federation.load(args.federation)
    recs = records.load_paths(args.records)
    path = Path(args.calibration) if args.calibration else None
    cal = calibration.load(path, fed) if path else calibration.fit(fed, recs)
    data = validate.check(fed, cal, recs, simgrid=args.simgrid)
    print(validate.format_table(data))
    rec = records.make("bench.model", data, **records.federation_meta(fed))
    emit(rec, args.out)
    return 0


def workload_args(p: argparse.ArgumentParser, model, predict: bool) -> None:
    """`predict WORKLOAD` and `advise WORKLOAD`: the model's own options after the shared ones."""
    _common(p)
    if predict:
        options.placement(p)
    else:
        p.add_argument("--nodes", type=positive_int,
                       help="nodes the job needs (required unless its input says, as a profile does)")
    model.add_arguments(p)
    p.set_defaults(workload=model.name)


def calibrate_args(p: argparse.ArgumentParser) -> None:
    options.federation(p, default=None)
    p.add_argument("records", nargs="+", help="record files or directories")
    p.add_argument("-o", "--output", help="calibration file to write (default: next to the federation file)")


def model_hpl_args(p: argparse.ArgumentParser) -> None:
    options.federation(p, default=None, what="federation file or shipped name (e.g. ma-hd-seed)")
    p.add_argument("--calibration", help="calibration file (default: next to the federation file, or shipped)")
    p.add_argument("--n", type=positive_int, default=40000, help="matrix order N (default 40000, seed 001's largest)")
    p.add_argument("--nb", type=positive_int, default=80, help="block size NB (default 80)")
    p.add_argument("--ranks-per-node", type=positive_int, default=1, help="ranks per node (default 1)")
    p.add_argument("--ranks", type=positive_int_list, help="process counts p, comma-separated (default: powers of two up to what the "
                                   "two sites hold)")
    p.add_argument("--vary", action="append", metavar="KEY=VALUE",
                   help="a changed link to compare, as --what-if takes it (repeatable; default "
                        "link.bandwidth=2x and 10x)")
    options.out(p, "geofed-out/model", "the model.hpl.scaling record")


def bench_model_args(p: argparse.ArgumentParser) -> None:
    options.federation(p, default=None)
    p.add_argument("records", nargs="+", help="record files or directories")
    p.add_argument("--calibration", help="calibration file (default: fitted from the one-site runs in the records)")
    p.add_argument("--simgrid", action=argparse.BooleanOptionalAction, default=True,
                   help="SimGrid's LV08 and CM02 beside the MPI rows (default on)")
    options.out(p, "geofed-out/model", "the bench.model record")
