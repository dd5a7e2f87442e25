"""The import graph keeps its layers: every arrow points down (or sideways within a layer),
Delta is spoken only in storage/, and no product module grows past 400 lines."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lakehouse_assets"

# Bottom to top. A module may import from its own layer or any layer below it.
LAYERS: list[set[str]] = [
    {"errors", "faults", "settings", "location", "spark_conf"},
    {"storage", "engine", "simulator"},
    {"streaming", "spark", "class_archive", "tables", "cdc"},
    {"ingestion", "quality", "spec", "outputs", "resource"},
    {"assets", "sensors", "reliability", "pipelines"},
    {"io"},
    {"definitions", "cli", "__init__"},
]
LAYER_OF = {unit: level for level, units in enumerate(LAYERS) for unit in units}
MAX_MODULE_LINES = 400


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _unit(path: Path) -> str:
    """The top-level unit of the package a file belongs to: ``storage``, ``spark``, ..."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in the file, function-level imports included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


def test_every_unit_has_a_layer() -> None:
    units = {_unit(path) for path in _modules()}
    assert units <= set(LAYER_OF), f"place these in LAYERS: {sorted(units - set(LAYER_OF))}"


def test_no_import_runs_back_up_the_layers() -> None:
    upward = []
    for path in _modules():
        source = _unit(path)
        for line, module in _imports(path):
            parts = module.split(".")
            if parts[0] != "lakehouse_assets" or len(parts) < 2:
                continue
            target = parts[1]
            if LAYER_OF.get(target, -1) > LAYER_OF[source]:
                upward.append(f"{path.relative_to(PACKAGE)}:{line} imports {module} ({source} -> {target})")
    assert not upward, "imports that run back up the layers:\n" + "\n".join(upward)


def test_the_io_manager_knows_tables_by_their_spec_not_by_how_they_are_declared() -> None:
    """io/ reads a table's TableSpec and what its body returned (spec.py, outputs.py), never
    the declaration modules: a new way to declare a table needs no change in io/."""
    declaring = {"assets", "pipelines"}
    found = [
        f"{path.relative_to(PACKAGE)}:{line} imports {module}"
        for path in _modules() if _unit(path) == "io"
        for line, module in _imports(path)
        if module.startswith("lakehouse_assets.") and module.split(".")[1] in declaring
    ]
    assert not found, "io/ imports from the declaration layer:\n" + "\n".join(found)


def test_only_the_entry_points_read_the_lakehouse_from_the_environment() -> None:
    """Where the lakehouse is comes from one place, the lakehouse resource (resource.py), built
    from the environment by the definitions and the CLI's entry; everything under them is handed it."""
    entry_points = {"settings.py", "resource.py", "definitions.py", "class_archive.py", "cli/__init__.py",
                    "cli/main.py",
                    # Only the AWS chain (endpoint, region) for a bare s3a:// URI, as the AWS
                    # clients underneath (S3A, delta-rs, pyarrow) read it themselves.
                    "location.py"}
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in _modules() if str(path.relative_to(PACKAGE)) not in entry_points
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if "from_env(" in line
    ]
    assert not found, "settings read from the environment below the entry points: " + ", ".join(found)


def test_the_store_is_built_in_one_place() -> None:
    """Every store comes from the lakehouse resource (``LakehouseResource.store()``, resource.py)
    and is handed down from it, so what reaching the lakehouse's tables takes is said once."""
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in _modules() if str(path.relative_to(PACKAGE)) not in {"storage/delta.py", "resource.py"}
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if "DeltaTableStore(" in line
    ]
    assert not found, "a store built outside LakehouseResource.store(): " + ", ".join(found)


# What only Spark's checkpoint logs and Delta's source offsets and commit files say: their
# folder names, field names and file names.
PRIVATE_FORMAT_WORDS = {"offsets", "commits", ".compact", "logOffset", "batchWatermarkMs", "batchTimestampMs",
                        "nextBatchWatermarkMs", "reservoirId", "reservoirVersion", "sourceVersion",
                        "isStartingVersion", "_delta_log"}


def test_no_module_reads_spark_or_delta_private_formats() -> None:
    """Every module reads public interfaces (Delta's history and snapshots, query progress,
    Dagster's records), never Spark's checkpoint files or Delta's log files by name: a Spark or
    Delta upgrade that changes a format changes nothing here."""
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
            if isinstance(node, ast.JoinedStr) and "020d" in ast.unparse(node):
                text = "a Delta log file name"
            if text in PRIVATE_FORMAT_WORDS or text == "a Delta log file name":
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} ({text})")
    assert not found, "private on-disk formats read: " + ", ".join(sorted(set(found)))


def test_the_tables_have_one_writer_and_delta_rs_never_writes() -> None:
    """Delta Lake's connector writes every table; delta-rs only reads, in processes without
    Spark (the event log is a view over the tables' histories: nothing writes it)."""
    writing = {"write_deltalake", "CommitProperties", "Transaction", "WriterProperties", "PostCommitHookProperties"}
    found = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "deltalake":
                found += [f"{path.relative_to(PACKAGE)}:{node.lineno} ({a.name})" for a in node.names if a.name in writing]
            if isinstance(node, ast.Attribute) and node.attr in {"optimize", "vacuum", "create_checkpoint", "restore"}:
                base = node.value
                if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "DeltaTable":
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} (DeltaTable(...).{node.attr})")
    assert not found, "delta-rs writes: " + ", ".join(found)


def test_only_storage_imports_deltalake() -> None:
    outside = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in _modules() if _unit(path) != "storage"
        for line, module in _imports(path) if module.split(".")[0] == "deltalake"
    ]
    assert not outside, f"deltalake imported outside storage/: {outside}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_400_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines: split it along a real seam"


def test_every_module_the_walk_through_names_exists() -> None:
    """docs/architecture.md names a module at each step of a record's way; each must be there."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([a-z_/*]+(?:\.py|/))`", doc))
    assert len(named) > 30, f"the walk-through names too few modules to be read: {sorted(named)}"
    missing = [name for name in sorted(named)
               if not list(PACKAGE.glob(name.rstrip("/"))) and not (PACKAGE.parent / name).exists()]
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
