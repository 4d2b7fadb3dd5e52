"""The import graph of src/geofed runs one way: federation file -> testbed/launcher ->
workload -> records -> report, with the command line on top of everything.

Each layer names the layers it may import (docs/architecture.md); a module may import
its own layer too. Imports inside functions count: they are arrows all the same. There
are no exemptions, and no import cycles between modules.
"""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "geofed"

# A module's layer is the one of the longest prefix that matches its dotted name.
LAYERS = {
    "base": ["geofed", "geofed.errors", "geofed.validate", "geofed.params", "geofed.stats", "geofed.federation",
             "geofed.native", "geofed.runtime", "geofed.progress"],
    "records": ["geofed.records"],
    "testbed": ["geofed.testbed"],
    "launch": ["geofed.launch"],
    "model": ["geofed.model"],
    "bench": ["geofed.bench"],
    "apps": ["geofed.apps"],
    "ops": ["geofed.ops"],
    "workloads": ["geofed.workloads"],
    "report": ["geofed.report"],
    "top": ["geofed.cli", "geofed.demo"],
}
MAY_IMPORT = {
    "base": set(),
    "records": {"base"},
    "testbed": {"base", "records"},
    "launch": {"base", "records", "testbed"},
    "model": {"base", "records", "launch"},
    "bench": {"base", "records", "testbed", "launch"},
    "apps": {"base", "records", "testbed", "launch", "bench"},
    "ops": {"base", "records", "testbed", "launch", "bench", "model"},
    "workloads": {"base", "records", "testbed", "launch", "model", "bench", "apps", "ops"},
    "report": {"records"},
    "top": set(LAYERS),
}


def layer_of(module: str) -> str:
    best, found = -1, None
    for layer, prefixes in LAYERS.items():
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, found = len(p), layer
    assert found is not None, f"{module}: in no layer; add it to LAYERS"
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name == "geofed" or a.name.startswith("geofed.")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                (node.module == "geofed" or node.module.startswith("geofed.")):
            found |= {f"{node.module}.{a.name}" if _is_module(f"{node.module}.{a.name}") else node.module
                      for a in node.names}
    return found


def _is_module(dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:])
    return (SRC / rel).with_suffix(".py").exists() or (SRC / rel / "__init__.py").exists()


def graph() -> dict[str, set[str]]:
    return {module_name(p): {t for t in imports(p) if t != module_name(p)} for p in sorted(SRC.rglob("*.py"))}


def test_every_import_runs_with_the_data_flow():
    wrong = [f"{me} ({layer_of(me)}) imports {t} ({layer_of(t)})" for me, targets in graph().items()
             for t in sorted(targets) if layer_of(t) != layer_of(me) and layer_of(t) not in MAY_IMPORT[layer_of(me)]]
    assert wrong == []


def test_no_import_cycles():
    """Between modules: two modules that import each other are one module in two files."""
    g, done, cycles = graph(), set(), []

    def visit(m, path):
        if m in path:
            cycles.append(" -> ".join(path[path.index(m):] + [m]))
            return
        if m in done or m not in g:
            return
        for t in sorted(g[m]):
            visit(t, path + [m])
        done.add(m)

    for m in sorted(g):
        visit(m, [])
    assert cycles == []


def test_the_checker_sees_a_wrong_import():
    assert "testbed" in MAY_IMPORT[layer_of("geofed.bench.mpi")]
    assert "bench" not in MAY_IMPORT[layer_of("geofed.testbed.core")]
    assert layer_of("geofed.cli.bench") == "top" and layer_of("geofed.workloads.exchange") == "workloads"
    assert MAY_IMPORT[layer_of("geofed.report.mdfs")] == {"records"}
    assert all(MAY_IMPORT[layer] <= set(LAYERS) for layer in LAYERS)


def _top_imports(path: Path) -> set[str]:
    """Every module a file imports, geofed's and others' (absolute imports)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def _allowed(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_report_reads_records_only():
    """The report renders typed records: it imports geofed.records (and errors), the
    standard library and plotting, never the capabilities that wrote the records."""
    import sys
    allowed = ("geofed.report", "geofed.records", "geofed.errors", "matplotlib", "numpy", "__future__")
    wrong = [f"{module_name(p)} imports {m}" for p in sorted((SRC / "report").rglob("*.py"))
             for m in sorted(_top_imports(p))
             if not _allowed(m, allowed) and m.split(".")[0] not in sys.stdlib_module_names]
    assert wrong == []


def test_records_sit_in_the_base_layer():
    """Record kinds import nothing of geofed above errors, validate, params and stats."""
    allowed = ("geofed.records", "geofed.errors", "geofed.validate", "geofed.params", "geofed.stats")
    wrong = [f"{module_name(p)} imports {m}" for p in sorted((SRC / "records").rglob("*.py"))
             for m in sorted(imports(p)) if m != "geofed" and not _allowed(m, allowed)]
    assert wrong == []
