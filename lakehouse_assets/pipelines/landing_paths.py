"""Where the files a pipeline's code reads land here: a path under the landing root, or one of
the authors' own paths mapped to it by the pipeline's ``lakehouse.mounts`` configuration
(``prefix = folder``, docs/guides/lakeflow.md). A path lands in the landing folder its first
part below the root names; what follows is the pattern of the folder's files it reads.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehouse_assets.location import Location, locate
from lakehouse_assets.pipelines.spec import PipelineError, PipelineProject, SourceLocation
from lakehouse_assets.settings import LANDING_DIR, LakehouseSettings

#: The configuration key mapping the pipeline's own paths to the landing root.
MOUNTS = "lakehouse.mounts"


@dataclass(frozen=True)
class LandedPath:
    """A path a pipeline reads, as the lakehouse lands it: the landing folder ``source`` (at
    ``folder``) and the ``pattern`` of its files the path names (None: all of them)."""

    source: str
    folder: Location
    pattern: str | None

    @property
    def spark_path(self) -> str:
        """The path Spark's file source reads."""
        return str(self.folder / self.pattern) if self.pattern else str(self.folder)


def mounts(project: PipelineProject) -> list[tuple[str, str]]:
    """The pipeline's ``lakehouse.mounts``: (prefix, folder) pairs, the longest prefix first."""
    text = project.configuration.get(MOUNTS, "")
    pairs = []
    for entry in text.replace("\n", ",").split(","):
        if not entry.strip():
            continue
        prefix, equals, folder = entry.partition("=")
        if not equals or not prefix.strip() or not folder.strip():
            raise PipelineError(f"{project.spec_file}: {MOUNTS} entry {entry.strip()!r} is not 'prefix = folder' "
                                "(e.g. /Volumes/main/raw = orders)")
        pairs.append((prefix.strip().rstrip("/"), folder.strip()))
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def landed_path(path: str, project: PipelineProject, settings: LakehouseSettings,
                where: SourceLocation | None = None) -> LandedPath:
    """Where the files at ``path`` (as a flow of ``project`` names them) land in the lakehouse
    of ``settings``; a path neither under the landing root nor mounted is refused."""
    landing = settings.root / LANDING_DIR
    at = f"{where}: " if where else ""
    target = _target(_mounted(path, project, landing), project, landing)
    below = target.removeprefix(landing.uri.rstrip("/") + "/")
    if below == target:
        raise PipelineError(
            f"{at}the flow reads files at {path}, outside the lakehouse's landing folders ({landing}/<source>); "
            f"land them in one and name it in the code or the pipeline's configuration, or map the path with "
            f"{MOUNTS} ({path.rstrip('/').rsplit('/', 1)[0]} = <folder under {landing}>)")
    parts = [part for part in below.split("/") if part]
    if not parts or any(char in parts[0] for char in "*?[{"):
        raise PipelineError(f"{at}the flow reads {target}, which names no landing folder: name one "
                            f"({landing}/<source>, optionally followed by a sub-folder, file or glob)")
    return LandedPath(parts[0], landing / parts[0], "/".join(parts[1:]) or None)


def _target(written: str, project: PipelineProject, landing: Location) -> str:
    """The absolute path or URI of what ``written`` names, as the landing root is spelled."""
    if "://" in written:
        bucket, _, key = locate(written, landing.store).path.partition("/")
        return f"s3a://{bucket}/{posixpath.normpath(key)}"
    local = Path(written)
    local = local if local.is_absolute() else project.folder / local
    return os.path.realpath(local)


def _mounted(path: str, project: PipelineProject, landing: Location) -> str:
    """``path`` with a mounted prefix replaced by its folder (under ``landing`` when relative)."""
    written = path.removeprefix("file:")
    for prefix, folder in mounts(project):
        if written == prefix or written.startswith(prefix + "/"):
            target = folder if folder.startswith("/") or "://" in folder else str(landing / folder)
            return target + written[len(prefix):]
    return written


def auto_loader_defaults(fmt: str, options: Mapping[str, Any], *, read_files: bool = False) -> dict[str, Any]:
    """``options`` of an Auto Loader or ``read_files`` read of ``fmt`` files, with Databricks'
    defaults where Spark's file source has others: nested folders read, a CSV header line, and
    (``read_files``) column types inferred (``inferColumnTypes``, Spark's ``inferSchema``)."""
    options = dict(options)
    spark_name = next((key for key in options if key.lower() == "inferschema"), None)
    if spark_name is not None:
        inferred = options.pop(spark_name)
        options.setdefault("inferColumnTypes", inferred)
    given = {key.removeprefix("cloudFiles.").lower() for key in options}
    defaults = {"recursiveFileLookup": "true"}
    if fmt.lower() == "csv":
        defaults["header"] = "true"
    if read_files:
        defaults["inferColumnTypes"] = "true"
    return {**{k: v for k, v in defaults.items() if k.lower() not in given}, **options}
