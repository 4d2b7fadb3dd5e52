"""Render records to an HTML page with PNG plots, one section per capability.

A capability's section module registers a renderer for its record kinds with
`@section(kind, title, order)` (`each=True`: it renders one record at a time); `render`
groups the records by kind and calls it.
Sections read typed records (geofed.records): a record whose fields do not fit its
kind was refused when it was loaded; content inside the fields that a section cannot
read is refused here, naming the files, before anything is written. Every record
with a correctness check shows its sanity verdict the same way, above its section.
"""

from __future__ import annotations

import html
import importlib
import pkgutil
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import matplotlib

from geofed.records import Record, RecordError

matplotlib.use("Agg")

class ReportError(Exception):
    """The report cannot be written where asked: one line for the user."""


Renderer = Callable[[list[Record], Path], str]  # (records of one kind, output dir) -> HTML


@dataclass(frozen=True)
class Section:
    kind: str
    title: str
    order: int
    render: Renderer


SECTIONS: dict[str, Section] = {}
# What comes before the sections (the overview): fn(records, layouts, outdir) -> HTML
LEADS: list[Callable[[list[Record], dict, Path], str]] = []


def lead(fn):
    """Register a part of the page that comes before every section."""
    LEADS.append(fn)
    return fn


def section(kind: str, title: str, order: int = 50, each: bool = False):
    """Register the renderer of a record kind's section: `fn(records, outdir) -> html`, or
    with `each`, `fn(record, index, outdir)` yielding the HTML pieces of one record (the
    section is every record's pieces in order)."""
    def register(fn):
        render = (lambda recs, outdir: "\n".join(piece for i, r in enumerate(recs) for piece in fn(r, i, outdir))) \
            if each else fn
        SECTIONS[kind] = Section(kind, title, order, render)
        return fn
    return register


def num(x, spec: str = ".4g") -> str:
    """A number for a table cell; "-" where there is none."""
    return "-" if x is None else format(x, spec)


def percent_change(x) -> str:
    """A relative difference (0.05) as a signed percentage (+5.0 %); "-" where there is none."""
    return "-" if x is None else f"{x * 100:+.1f} %"


def esc(x) -> str:
    return html.escape(str(x))


def mpi_transport(r: Record) -> str:
    """` · transport ...` for a record that names how its MPI's ranks talked (geofed.launch.mpi)."""
    said = r.meta.get("mpi_transport")
    return f" · {esc(r.meta.get('mpi', ''))} transport: {esc(said)}" if said else ""


def table(header: list[str], rows: list[list], classes: list[str] | None = None) -> str:
    """An HTML table; `classes` marks rows (e.g. 'fail')."""
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>")
    return "\n".join(out) + "</table>"


def figure(fig, outdir: Path, name: str, alt: str) -> str:
    """Save a matplotlib figure as outdir/name (PNG), close it, and return its <img> tag."""
    import matplotlib.pyplot as plt
    fig.tight_layout()
    fig.savefig(outdir / name, dpi=100)
    plt.close(fig)
    return f"<img src='{esc(name)}' alt='{esc(alt)}'>"


STYLE = """
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: right; }
th { background: #eee; }
tr.fail td { background: #fdd; }
#overview td, #overview th { text-align: left; }
p.sanity-fail { background: #fdd; }
img { max-width: 100%; }
.meta { color: #666; font-size: 90%; }
"""


def sanity_lines(records: list[Record]) -> str:
    """Each record's correctness verdict, one line each, the same for every kind."""
    out = []
    for r in records:
        s = r.sanity()
        if s is not None:
            out.append(f"<p class='sanity-{'ok' if s.ok else 'fail'}'>sanity: <b>{'ok' if s.ok else 'FAILED'}</b> "
                       f"({esc(s.why)}) · {esc(r.created)}</p>")
    return "\n".join(out)


def load_sections() -> None:
    """Import every module of this package: each registers its sections, so a new
    section is one new module."""
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


def render(records: list[Record], outdir: str | Path, title: str = "geofed report",
           layouts: dict[str, dict] | None = None) -> Path:
    """report.html and its PNGs in `outdir`: the overview first (drawn from the
    federations' `layouts`, by name), then a section per kind. Rendered in a temporary
    directory first, so a record that cannot be read leaves no half-written report behind."""
    load_sections()
    outdir = Path(outdir)
    by_kind: dict[str, list[Record]] = {}
    for r in records:
        by_kind.setdefault(r.kind, []).append(r)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
             f"<style>{STYLE}</style></head><body><h1>{esc(title)}</h1>"]
    known = sorted((SECTIONS[k] for k in by_kind if k in SECTIONS), key=lambda s: s.order)
    with tempfile.TemporaryDirectory(prefix="geofed-report-") as tmp:
        try:
            parts += [fn(records, layouts or {}, Path(tmp)) for fn in LEADS]
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            where = ", ".join(sorted({r.path or r.created for r in records}))
            raise RecordError(f"{where}: {', '.join(sorted(by_kind))}: content the overview cannot read "
                              f"({type(e).__name__}: {e})") from None
        for s in known:
            parts.append(f"<h2>{esc(s.title)}</h2>")
            try:
                parts.append(sanity_lines(by_kind[s.kind]))
                parts.append(s.render(by_kind[s.kind], Path(tmp)))
            except (KeyError, IndexError, TypeError, ValueError, AttributeError, ZeroDivisionError) as e:
                # the top-level fields were checked at load; this is the content inside them
                where = ", ".join(sorted({r.path or r.created for r in by_kind[s.kind]}))
                raise RecordError(f"{where}: {s.kind} version {by_kind[s.kind][0].version}: content this section "
                                f"cannot read ({type(e).__name__}: {e})") from None
        unknown = sorted(k for k in by_kind if k not in SECTIONS)
        if unknown:
            parts.append("<h2>Other records</h2><p>No section renders: " + esc(", ".join(unknown)) + "</p>")
            parts += [sanity_lines(by_kind[k]) for k in unknown]
        parts.append("</body></html>")
        (Path(tmp) / "report.html").write_text("\n".join(parts))
        try:
            outdir.mkdir(parents=True, exist_ok=True)
            for f in sorted(Path(tmp).iterdir()):
                shutil.move(str(f), outdir / f.name)
        except OSError as e:
            raise ReportError(f"{outdir}: cannot write the report there ({e.strerror})") from None
    return outdir / "report.html"
