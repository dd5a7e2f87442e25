"""A Spark Declarative Pipelines project folder, as ``spark-pipelines`` reads it: its spec
(``spark-pipeline.yml``, or Lakeflow's ``pipeline.yml``), read by pyspark's own reader, and
the source files its ``libraries`` globs name. Dataset names resolve as SDP resolves them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from lakehouse_assets.errors import LakehouseError

#: The spec's file names, pyspark's first, then Lakeflow's.
SPEC_NAMES = ("spark-pipeline.yml", "spark-pipeline.yaml", "pipeline.yml", "pipeline.yaml")
DEFAULT_SCHEMA = "default"
SOURCE_SUFFIXES = (".py", ".sql")


class PipelineError(LakehouseError):
    """A pipeline that cannot run as this asset graph; the message names file, line, construct, what instead."""


@dataclass(frozen=True)
class SourceLocation:
    """Where a dataset or a construct is written: a file and a line (1-based)."""

    file: Path
    line: int | None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else str(self.file)


@dataclass(frozen=True)
class PipelineProject:
    """One pipeline folder: its ``name``, the default ``schema`` of its datasets, its
    ``configuration`` (what its code reads with ``spark.conf.get``) and its source files."""

    folder: Path
    spec_file: Path
    name: str
    schema: str
    configuration: Mapping[str, str]
    files: tuple[Path, ...]

    def qualified(self, name: str, where: SourceLocation | None = None) -> str:
        """``name`` as written in the pipeline's code, as the table it is: ``schema.name``."""
        at = f"{where}: " if where else ""
        if "/" in name:  # delta.`/path`: a table by its path, not its name
            raise PipelineError(f"{at}{name!r} reads a table by its path, which the asset graph cannot map to an "
                                "asset: read the table by name (one of the pipeline's, or a lakehouse table), or land "
                                "its data as files and read them with read_files / cloudFiles")
        parts = [part.strip("`") for part in name.split(".")]
        if len(parts) == 2 and parts[0].lower() == "live":
            parts = parts[1:]
        if len(parts) == 3:
            parts = parts[1:]
        if len(parts) == 1:
            parts = [self.schema, *parts]
        if len(parts) != 2 or not all(parts):
            raise PipelineError(f"{at}{name!r} is not a dataset name: write name, schema.name or catalog.schema.name")
        return ".".join(parts)


def load_project(folder: Path) -> PipelineProject:
    """The pipeline project in ``folder`` (a ``LAKEHOUSE_PIPELINES`` entry)."""
    from pyspark.errors import PySparkException
    from pyspark.pipelines.cli import unpack_pipeline_spec

    folder = folder.expanduser().resolve()
    specs = [folder / name for name in SPEC_NAMES if (folder / name).is_file()]
    if len(specs) != 1:
        found = ", ".join(spec.name for spec in specs) if specs else "none"
        raise PipelineError(
            f"LAKEHOUSE_PIPELINES names {folder}, which must hold one pipeline spec ({' or '.join(SPEC_NAMES[:3])}); "
            f"found {found}. Point LAKEHOUSE_PIPELINES at the folder of the pipeline's spec.")
    spec_file = specs[0]
    try:
        data = yaml.safe_load(spec_file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise PipelineError(f"{spec_file}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise PipelineError(f"{spec_file}: a pipeline spec is a mapping (name, libraries, ...)")
    # The lakehouse keeps each table's checkpoint itself: SDP's storage folder is not used.
    data.setdefault("storage", str(folder / "storage"))
    try:
        spec = unpack_pipeline_spec(data)
    except (PySparkException, KeyError, TypeError) as exc:
        raise PipelineError(f"{spec_file}: {exc}") from exc
    files: set[Path] = set()
    for library in spec.libraries:
        files.update(path for path in folder.glob(library.include)
                     if path.is_file() and "__pycache__" not in path.parts)
    others = sorted(str(path) for path in files if path.suffix not in SOURCE_SUFFIXES)
    if others:
        raise PipelineError(f"{spec_file}: its libraries name {', '.join(others)}; a pipeline's sources are "
                            ".py and .sql files: narrow the glob")
    if not files:
        raise PipelineError(f"{spec_file}: its libraries globs match no .py or .sql file under {folder}")
    return PipelineProject(folder=folder, spec_file=spec_file, name=spec.name,
                           schema=spec.database or DEFAULT_SCHEMA, configuration=dict(spec.configuration),
                           files=tuple(sorted(files)))
