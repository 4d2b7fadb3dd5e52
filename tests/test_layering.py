"""The import graph of src/geofed runs one way: no module imports a higher layer.

Data flows federation file -> testbed/launcher -> workload -> records -> report; the
command-line modules sit on top of everything. A module may import its own layer and
the ones below it. Imports inside functions count too: they are arrows all the same.
"""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "geofed"

# Lowest first. A module's layer is the first prefix that matches its dotted name.
LAYERS = [
    ("base", ["geofed", "geofed.errors", "geofed.validate", "geofed.stats", "geofed.records", "geofed.federation",
              "geofed.native", "geofed.runtime"]),
    ("testbed", ["geofed.testbed"]),
    ("launch", ["geofed.launch"]),
    ("bench", ["geofed.bench"]),
    ("workloads", ["geofed.apps"]),
    ("model", ["geofed.model"]),
    ("ops", ["geofed.ops"]),
    ("report", ["geofed.report"]),
    ("top", ["geofed.cli", "geofed.demo"]),
]


def layer_of(module: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    assert rank is not None, f"{module}: in no layer; add it to LAYERS"
    return rank


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


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        me = module_name(path)
        for target in sorted(imports(path)):
            if layer_of(target) > layer_of(me):
                wrong.append(f"{me} ({LAYERS[layer_of(me)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})")
    assert wrong == []


def test_the_checker_sees_an_upward_import(tmp_path):
    assert layer_of("geofed.testbed.core") < layer_of("geofed.bench.jobs")
    assert layer_of("geofed.cli.bench") == len(LAYERS) - 1
    assert layer_of("geofed.apps.mdfs.core") < layer_of("geofed.report.mdfs")


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
    """Record kinds import nothing of geofed above errors, validate and stats."""
    allowed = ("geofed.records", "geofed.errors", "geofed.validate", "geofed.stats")
    wrong = [f"{module_name(p)} imports {m}" for p in sorted((SRC / "records").rglob("*.py"))
             for m in sorted(imports(p)) if m != "geofed" and not _allowed(m, allowed)]
    assert wrong == []
