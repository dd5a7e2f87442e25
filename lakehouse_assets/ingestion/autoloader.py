"""Auto Loader-style incremental ingestion of a landing folder into a bronze Delta table.

Spark's own file stream source finds the files, and its checkpoint makes each file read once.
The ingestion adds what Auto Loader adds on top: a stored schema (:mod:`.schema_store`),
schema evolution modes, rescued data (:mod:`.rescue`) and the ``_source_file`` /
``_ingested_at`` columns. Which files the tables hold is read from their ``_source_file``
column (:mod:`.state`), never from the checkpoint.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from lakehouse_assets.errors import failure_text
from lakehouse_assets.ingestion.columns import METADATA_COLUMNS
from lakehouse_assets.ingestion.errors import LandingFolderMissingError, SchemaEvolvedError, UnknownColumnsError
from lakehouse_assets.ingestion.files import LandedFile
from lakehouse_assets.ingestion.options import AutoLoaderOptions
from lakehouse_assets.ingestion.readiness import glob_of_names, hold_back
from lakehouse_assets.ingestion.records import csv_records, file_reader, json_documents, text_lines, with_source_file
from lakehouse_assets.ingestion.rescue import (
    READ_SCHEMA_STALE_MARKER,
    parse_marker,
    shape_json_records,
    shape_parquet,
    shape_records,
)
from lakehouse_assets.ingestion.schema_store import (
    SchemaStore,
    add_columns,
    infer_schema,
    new_columns,
    resolve_schema,
)
from lakehouse_assets.ingestion.state import ingested_files, rewritten_files, unread_files
from lakehouse_assets.location import Location, locate, spark_file_uri
from lakehouse_assets.storage import DeltaTableStore

logger = logging.getLogger(__name__)

# Restarts within one run (with continue_on_new_columns): each picks up the columns found in
# one micro-batch's files.
MAX_SCHEMA_RESTARTS = 20

PathLike = str | os.PathLike[str]


def autoload_stream(
    spark: SparkSession,
    *,
    source_dir: PathLike,
    options: AutoLoaderOptions,
    schema_location: PathLike,
    unread: Sequence[LandedFile] | None = None,
) -> DataFrame:
    """A streaming DataFrame of the files landing in ``source_dir`` (a :class:`Location` on
    object storage), like ``spark.readStream.format("cloudFiles")``: the stored schema's
    columns (inferred and stored at ``schema_location`` on the first call), then
    ``_rescued_data``, ``_source_file`` and ``_ingested_at``. Run it with a checkpoint of its
    own and a :class:`SchemaEvolutionPolicy` as the restart policy. ``unread`` (the files no
    table holds yet; None: every landed file) lets a run hold back the files it must not read
    yet, and Parquet in ``rescue`` mode plan for the columns of only those it will read.
    Raises :class:`~.errors.NothingToInferError` when nothing has landed and no schema is stored.
    """
    source, where = locate(source_dir), str(schema_location)
    stored = resolve_schema(spark, source, options, SchemaStore(schema_location))
    if not source.is_dir():
        raise LandingFolderMissingError(str(source), where)
    pending = list(options.landed_files(source) if unread is None else unread)
    name_glob = _names_to_read(pending)
    reader = file_reader(spark, options, streaming=True, name_glob=name_glob)
    mode = options.schema_evolution_mode
    if options.format != "parquet":
        lines = text_lines(reader.load(options.read_path(str(source))), options)
        if options.format == "json":
            return shape_json_records(json_documents(lines, options), stored.schema, mode=mode, schema_location=where,
                                      options=options)
        return shape_records(csv_records(lines, options, source.store), stored.schema, mode=mode, schema_location=where)
    extra = (
        new_columns(stored.schema, infer_schema(spark, [f.path for f in pending], options, store=source.store))
        if mode == "rescue" and pending else T.StructType([])
    )
    rows = reader.schema(T.StructType([*stored.schema.fields, *extra.fields])).load(options.read_path(str(source)))
    return shape_parquet(with_source_file(rows, options), stored.schema, mode=mode, extra=extra, schema_location=where,
                         store=source.store)


@dataclass(frozen=True)
class AutoLoader:
    """One landing folder ingested into one table, like the course's ``autoload_to_table``:
    the stream of its files, the restart policy that evolves its stored schema, and whether a
    run has anything to read. ``tables`` hold its rows (the table, and a routed ingestion's
    quarantine), read through ``store``.
    """

    source_dir: Location
    options: AutoLoaderOptions
    schema_location: Location
    tables: tuple[str, ...]
    store: DeltaTableStore

    @functools.cached_property
    def ingested(self) -> set[str]:
        """The landed files the tables held when first asked (once per loader: one run)."""
        return ingested_files(self.store, self.tables)

    def unread(self) -> list[LandedFile]:
        """The landed files no table holds yet."""
        return unread_files(self.source_dir, self.options, self.ingested)

    def stream(self, spark: SparkSession) -> DataFrame:
        """The streaming DataFrame of the landed files (:func:`autoload_stream`)."""
        return autoload_stream(
            spark, source_dir=self.source_dir, options=self.options,
            schema_location=self.schema_location, unread=self.unread(),
        )

    def restart_policy(self, spark: SparkSession) -> SchemaEvolutionPolicy:
        """What to do when the query stops on new columns (:class:`SchemaEvolutionPolicy`)."""
        return SchemaEvolutionPolicy(spark, self.options, schema_location=self.schema_location,
                                     unread=[f.path for f in self.unread()])

    def has_new_data(self) -> bool | None:
        """Whether a run would read anything: an unread landed file that is not held back.
        False when nothing readable has landed (a first run with an empty folder does nothing);
        None when the folder is gone after files were ingested from it, so that the query's
        start says so."""
        if not self.source_dir.is_dir():
            return None if SchemaStore(self.schema_location).latest() is not None else False
        unread = self.unread()
        return len(hold_back(unread)) < len(unread)

    def warnings(self) -> list[str]:
        """What a run will not read, file by file, each with what to do: files held back
        (:mod:`.readiness`) and files written again under a name already ingested."""
        if not self.source_dir.is_dir():
            return []
        messages = [f"Not reading {h.message()}" for h in hold_back(self.unread())]
        messages += [
            f"Not reading {f.path} again: it was written again (modified {f.modification_time:%Y-%m-%d %H:%M:%S} "
            "UTC) after it was ingested, and a landed file name is ingested once. If its content changed, "
            "land the new content under a new name (e.g. with a version suffix) and remove this one; if "
            "it is the same, remove it or leave it."
            for f in rewritten_files(self.source_dir, self.options, self.ingested, self.store, self.tables)
        ]
        return messages


class SchemaEvolutionPolicy:
    """The restart policy of an ingestion query (``run_stream(..., restart_when=...)``).

    On new columns in ``addNewColumns`` mode it adds them to the stored schema (named in the
    error unless given), typed by inferring the files the run found ``unread`` (else the file
    the error names) with the hints applied; it restarts the query with
    ``continue_on_new_columns``, or when a Parquet read must be planned again to rescue columns.
    Otherwise the run stops with an error naming the columns, files and what to do
    (:class:`~.errors.SchemaEvolvedError`, :class:`~.errors.UnknownColumnsError`). Any other
    failure is not its business: it answers no.
    """

    def __init__(
        self,
        spark: SparkSession,
        options: AutoLoaderOptions,
        *,
        schema_location: PathLike | None = None,
        unread: Sequence[str] = (),
    ) -> None:
        self._spark = spark
        self._options = options
        self._schema_location = schema_location
        self._unread = tuple(unread)

    def __call__(self, error: BaseException) -> bool:
        """Whether to restart the query after ``error``; raises the schema's error when the run stops on it."""
        marked = parse_marker(failure_text(error))
        if marked is None:
            return False
        if marked.marker == READ_SCHEMA_STALE_MARKER:
            return True
        location = str(self._schema_location or marked.schema_location or "")
        files = [spark_file_uri(f) for f in [marked.file] if f]
        if self._options.schema_evolution_mode != "addNewColumns":
            raise UnknownColumnsError(columns=marked.columns, files=files, schema_location=location) from error
        store = SchemaStore(self._schema_location or location) if location else None
        current = store.latest() if store is not None else None
        if store is None or current is None:
            return False
        paths = list(dict.fromkeys([spark_file_uri(p) for p in self._unread] + files))
        added = new_columns(current.schema, infer_schema(self._spark, paths, self._options, store=store.folder.store))
        # A column the query saw but inference did not type is still added, as a string, so the
        # restarted query does not stop on it again.
        typed = {f.name.lower() for f in added.fields}
        untyped = [T.StructField(c, T.StringType(), True) for c in marked.columns
                   if c.lower() not in typed and c not in METADATA_COLUMNS]
        added = new_columns(current.schema, T.StructType(list(added.fields) + untyped))
        if not added.fields:
            return False
        evolved = add_columns(store, current, added, options=self._options, files=paths)
        columns, files = [f.name for f in added.fields], files or paths
        logger.warning("New columns %s in %s; stored schema %s is now version %s", columns, files, location,
                       evolved.version)
        if self._options.continue_on_new_columns:
            return True
        raise SchemaEvolvedError(columns=columns, files=files, schema_location=location,
                                 schema_version=evolved.version) from error


def _names_to_read(unread: Sequence[LandedFile]) -> str | None:
    """A glob of the names of the unread files this run may read, when some are held back
    (each is logged with its reason and what to do); None when every unread file may be read.
    Files of a batch that did not finish are replayed by Spark whatever the glob says."""
    held = hold_back(unread)
    if not held:
        return None
    held_paths = {h.file.path for h in held}
    return glob_of_names([f.relative_path.rsplit("/", 1)[-1] for f in unread if f.path not in held_paths])
