"""CLI of the Gray-Scott workflow: `geofed workflow grayscott`, `geofed bench grayscott`."""

from __future__ import annotations

from pathlib import Path

from geofed.progress import progress
from geofed.validate import nonnegative_float, positive_float, positive_int


def _settings(args):
    from geofed.apps.grayscott import settings
    base = settings.load(args.settings).to_json() if args.settings else {}
    over = {k: getattr(args, k) for k in ("L", "steps", "plotgap", "noise") if getattr(args, k, None) is not None}
    s = settings.from_dict({**base, **over}, args.settings or "command line")
    for w in s.warnings():
        progress(f"warning: {w}")
    return s


def cmd_workflow_grayscott(args) -> int:
    from geofed import federation, records, report
    from geofed.apps.grayscott import workflow
    from geofed.testbed.core import require_up
    fed = federation.load(args.federation)
    s = _settings(args)
    workflow.check_sites(fed, sim_site=args.sim_site, analysis_site=args.analysis_site, pdf_site=args.pdf_site,
                         plot_site=args.plot_site)
    require_up(fed)
    delays = {"pdf": args.slow_pdf} if args.slow_pdf else {}
    rec = workflow.run(fed, s, Path(args.out), sim_site=args.sim_site, analysis_site=args.analysis_site,
                       pdf_site=args.pdf_site, plot_site=args.plot_site, sim_ranks=args.sim_ranks,
                       pdf_ranks=args.pdf_ranks, connect_timeout=args.connect_timeout, timeout=args.timeout,
                       delays=delays, checkpoint=args.checkpoint, progress=progress)
    print(workflow.format_table(rec))
    print(f"record: {records.save(rec, args.out)}")
    print(f"report: {report.render(records.load_dir(args.out), args.out, title='geofed workflow grayscott')}")
    return 0 if rec.data.verify["ok"] else 1


def _sizes(text: str) -> list[tuple[int, int]]:
    from geofed.errors import UserError
    try:
        pairs = [tuple(int(x) for x in item.split(":")) for item in text.split(",")]
    except ValueError:
        pairs = []
    if not pairs or any(len(p) != 2 or min(p) < 1 for p in pairs):
        raise UserError(f"--sizes: expected L:STEPS pairs like 64:200,128:60, got {text!r}")
    return pairs


def cmd_bench_grayscott(args) -> int:
    from geofed import federation, records
    from geofed.apps.grayscott import bench, workflow
    from geofed.testbed.core import require_up
    fed = federation.load(args.federation)
    s = _settings(args)
    sizes = _sizes(args.sizes)
    workflow.check_sites(fed, sim_site=args.sim_site, analysis_site=args.analysis_site)
    require_up(fed)
    rec = bench.run(fed, s, sizes, Path(args.out), sim_site=args.sim_site, analysis_site=args.analysis_site,
                    sim_ranks=args.sim_ranks, timeout=args.timeout, progress=progress)
    print(bench.format_table(rec))
    print(f"record: {records.save(rec, args.out)}")
    return 0 if all(c["on"]["intact"] for c in rec.data.cases) else 1


def _settings_args(p) -> None:
    p.add_argument("--settings", help="settings JSON in the ADIOS2 tutorial's shape (default: the tutorial defaults)")
    p.add_argument("--L", type=positive_int, help="override the settings' L (cells per side)")
    p.add_argument("--steps", type=positive_int, help="override the settings' steps")
    p.add_argument("--plotgap", type=positive_int, help="override the settings' plotgap")
    p.add_argument("--noise", type=nonnegative_float, help="override the settings' noise")


def register(commands, bench) -> None:
    wf = commands.add_parser("workflow", help="multi-site workflows").add_subparsers(dest="workflow", required=True)
    p = wf.add_parser("grayscott", help="Gray-Scott at one site, staged with ADIOS2 SST to analysis at another (root)")
    p.add_argument("--federation", "-f", default="icm-task", help="federation file or shipped name (default icm-task)")
    p.add_argument("--sim-site", default="G", help="site of the simulation (default G, as in seed 000)")
    p.add_argument("--analysis-site", default="W", help="site of the consumers (default W)")
    p.add_argument("--pdf-site", help="site of the PDF analysis (default: --analysis-site)")
    p.add_argument("--plot-site", help="site of the two plotters (default: --analysis-site)")
    p.add_argument("--sim-ranks", type=positive_int, default=4, help="MPI ranks of the simulation (default 4)")
    p.add_argument("--pdf-ranks", type=positive_int, default=1, help="MPI ranks of the PDF analysis (default 1)")
    p.add_argument("--connect-timeout", type=positive_float, default=60.0,
                   help="seconds the simulation waits for its consumers to connect (default 60)")
    p.add_argument("--timeout", type=positive_float, default=3600.0, help="stop the whole workflow after this many seconds")
    p.add_argument("--slow-pdf", type=nonnegative_float, default=0.0, help="make the PDF analysis take this many extra seconds per step")
    p.add_argument("--checkpoint", action="store_true",
                   help="the simulation also writes U and V at every output step to gs.bp (BP5) in the run's directory")
    p.add_argument("--out", default="geofed-out/grayscott", help="directory for records, frames and the report")
    _settings_args(p)
    p.set_defaults(func=cmd_workflow_grayscott)

    p = bench.add_parser("grayscott", help="Gray-Scott time per step with SST staging across a link against without (root)")
    p.add_argument("--federation", "-f", default="icm-task", help="federation file or shipped name (default icm-task)")
    p.add_argument("--sim-site", default="G", help="site of the simulation (default G)")
    p.add_argument("--analysis-site", default="W", help="site of the consumers (default W)")
    p.add_argument("--sim-ranks", type=positive_int, default=4, help="MPI ranks of the simulation (default 4)")
    p.add_argument("--sizes", default="64:200,128:100",
                   help="L:STEPS pairs to measure (default 64:200,128:100: about 2 minutes on 2 cores)")
    p.add_argument("--timeout", type=positive_float, default=900.0, help="stop a run after this many seconds")
    p.add_argument("--out", default="geofed-out/bench", help="directory for the JSON record and the runs' logs")
    p.add_argument("--settings", help="settings JSON (its L and steps are replaced by --sizes)")
    p.add_argument("--plotgap", type=positive_int, help="override the settings' plotgap")
    p.set_defaults(func=cmd_bench_grayscott)
