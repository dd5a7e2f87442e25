"""What an Auto Loader-style ingestion reads and how: :class:`AutoLoaderOptions`, with typed
fields, or Databricks' option names through :meth:`AutoLoaderOptions.from_options`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from lakehouse_assets.ingestion.errors import IngestionOptionsError
from lakehouse_assets.ingestion.files import LandedFile, list_data_files
from lakehouse_assets.location import Location

SourceFormat = Literal["json", "csv", "parquet"]
SchemaEvolutionMode = Literal["addNewColumns", "rescue", "failOnNewColumns", "none"]

# Auto Loader's default batch size when no rate limit is given: a large backlog is read in
# several micro-batches instead of one that may not fit in memory.
DEFAULT_MAX_FILES_PER_TRIGGER = 1000
DEFAULT_INFERENCE_MAX_FILES = 1000

# Reader options each format understands, beyond the typed fields. Anything else is refused:
# a misspelt option silently ignored would change what lands in bronze.
_LISTING_OPTIONS = {"recursiveFileLookup"}
_READER_OPTIONS: Mapping[str, frozenset[str]] = {
    # JSON options are given to Spark's JSON parser (from_json), which reads each record.
    "json": frozenset(
        {
            "allowComments",
            "allowUnquotedFieldNames",
            "allowSingleQuotes",
            "allowNumericLeadingZeros",
            "allowBackslashEscapingAnyCharacter",
            "allowNonNumericNumbers",
            "allowUnquotedControlChars",
        }
    ),
    # CSV options are honoured by the ingestion's own header-aware CSV parser.
    "csv": frozenset({"sep", "delimiter", "quote", "escape", "nullValue"}),
    "parquet": frozenset({"datetimeRebaseMode", "int96RebaseMode"}),
}

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


@dataclass(frozen=True, kw_only=True)
class AutoLoaderOptions:
    """How files in a landing folder become rows of a bronze table.

    - ``format``: ``json`` (JSON lines, or one document per file with ``multi_line``), ``csv``
      or ``parquet``.
    - ``schema_hints``: top-level column types that override inference, in DDL (``"time
      DOUBLE, mrn BIGINT"``); hinted columns missing from the data are added.
    - ``infer_column_types``: off (Auto Loader's default) reads every JSON/CSV column as a
      string; on infers bigint, double, boolean, timestamp, structs and arrays.
    - ``schema_evolution_mode``: for a column the stored schema lacks, ``addNewColumns`` stops
      the run naming it and adds it to the stored schema (``continue_on_new_columns`` restarts
      within the run); ``rescue`` puts its values in ``_rescued_data``; ``failOnNewColumns``
      stops until the file or the schema is fixed; ``none`` ignores it.
    - ``max_files_per_trigger`` / ``max_bytes_per_trigger`` (``"10g"``, ``"512m"`` or a
      number): one of the two limits a micro-batch; by default 1,000 files.
    - ``multi_line``: each JSON/CSV file is one document (a JSON object or array, or CSV with
      quoted line breaks).
    - ``header``: CSV files start with a header naming the columns (matched by name, file by
      file); without it columns are ``_c0``, ``_c1``, ...
    - ``path_glob_filter``: only file names matching this glob are data (``"*.json"``);
      ``path_pattern``: only the files ``folder/path_pattern`` names (``batch_*/orders.csv``,
      ``customers``), at any depth.
    - ``schema_inference_max_files``: how many files the first schema is inferred from.
    - ``reader_options``: further format options (JSON: ``allowComments``...; CSV: ``sep``,
      ``quote``, ``escape``, ``nullValue``; any format: ``recursiveFileLookup``).
    """

    format: SourceFormat = "json"
    schema_hints: str | None = None
    infer_column_types: bool = False
    schema_evolution_mode: SchemaEvolutionMode = "addNewColumns"
    continue_on_new_columns: bool = False
    max_files_per_trigger: int | None = None
    max_bytes_per_trigger: int | str | None = None
    multi_line: bool = False
    header: bool = False
    path_glob_filter: str | None = None
    path_pattern: str | None = None
    schema_inference_max_files: int = DEFAULT_INFERENCE_MAX_FILES
    reader_options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for what, value, known in (("source format", self.format, get_args(SourceFormat)),
                                   ("schemaEvolutionMode", self.schema_evolution_mode, get_args(SchemaEvolutionMode))):
            if value not in known:
                raise IngestionOptionsError(f"Unknown {what} {value!r}: use one of {', '.join(known)}")
        if self.continue_on_new_columns and self.schema_evolution_mode != "addNewColumns":
            raise IngestionOptionsError(
                "continue_on_new_columns only applies to schemaEvolutionMode addNewColumns, "
                f"not {self.schema_evolution_mode}"
            )
        for what, count in (("maxFilesPerTrigger", self.max_files_per_trigger),
                            ("schema_inference_max_files", self.schema_inference_max_files)):
            if count is not None and count < 1:
                raise IngestionOptionsError(f"{what} must be at least 1, got {count}")
        if self.max_files_per_trigger is not None and self.max_bytes_per_trigger is not None:
            raise IngestionOptionsError(
                "Give maxFilesPerTrigger or maxBytesPerTrigger, not both: Spark's file source "
                "limits a micro-batch by one of them"
            )
        if self.max_bytes_per_trigger is not None:
            parse_byte_size(self.max_bytes_per_trigger, option="maxBytesPerTrigger")
        if self.schema_hints is not None and not self.schema_hints.strip():
            object.__setattr__(self, "schema_hints", None)
        allowed = _READER_OPTIONS[self.format] | _LISTING_OPTIONS
        unknown = sorted(set(self.reader_options) - allowed)
        if unknown:
            raise IngestionOptionsError(
                f"Unknown {self.format} reader option(s) {unknown}: this ingestion understands "
                f"{sorted(allowed)} (and the typed fields of AutoLoaderOptions)"
            )
        for key in sorted({"sep", "delimiter", "quote", "escape"} & set(self.reader_options)):
            if len(str(self.reader_options[key])) != 1:
                raise IngestionOptionsError(f"CSV option {key} must be one character, got {self.reader_options[key]!r}")
        frozen = MappingProxyType({k: str(v) for k, v in self.reader_options.items()})
        object.__setattr__(self, "reader_options", frozen)

    # -- Auto Loader's option names -------------------------------------------------------------
    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> AutoLoaderOptions:
        """Options as a Databricks notebook gives them to ``readStream.option(...)``
        (``cloudFiles.format``, ``multiLine``, ...: see ``_AUTO_LOADER_NAMES``; the ``cloudFiles.``
        prefix is optional); other keys become reader options."""
        typed: dict[str, Any] = {}
        reader: dict[str, str] = {}
        for raw_key, value in options.items():
            key = raw_key[len("cloudFiles.") :] if raw_key.startswith("cloudFiles.") else raw_key
            target = _AUTO_LOADER_NAMES.get(key)
            if target is None:
                if key in _LISTED_ANYWAY and str(value).strip().lower() == _LISTED_ANYWAY[key]:
                    continue  # what this ingestion does anyway
                if key in {"schemaLocation", *_LISTED_ANYWAY}:
                    raise IngestionOptionsError(
                        f"Option {raw_key}={value} has no effect here: the schema location is an argument, and "
                        "files are found by listing the whole folder on every run, existing files included"
                    )
                reader[key] = str(value)
                continue
            name, kind = target
            typed[name] = _convert(raw_key, value, kind)
        return cls(**typed, reader_options=reader)

    # -- derived ---------------------------------------------------------------------------------
    def landed_files(self, source_dir: Location | str) -> list[LandedFile]:
        """The data files in ``source_dir`` these options read (nested folders with
        ``recursiveFileLookup``, names matching ``path_glob_filter``, under ``path_pattern``)."""
        recursive = self.reader_options.get("recursiveFileLookup", "").lower() == "true"
        return list_data_files(source_dir, recursive=recursive, path_glob_filter=self.path_glob_filter,
                               path_pattern=self.path_pattern)

    def read_path(self, source_dir: str) -> str:
        """The path Spark's file source is given for ``source_dir``: the folder, or the files of it
        ``path_pattern`` names."""
        return f"{source_dir.rstrip('/')}/{self.path_pattern.strip('/')}" if self.path_pattern else source_dir

    def rate_limit(self) -> dict[str, str]:
        """The file source's rate-limit option: the given one (a size in bytes), or 1,000 files per batch."""
        if self.max_bytes_per_trigger is not None:
            return {"maxBytesPerTrigger": str(parse_byte_size(self.max_bytes_per_trigger, option="maxBytesPerTrigger"))}
        return {"maxFilesPerTrigger": str(self.max_files_per_trigger or DEFAULT_MAX_FILES_PER_TRIGGER)}

    def inference_key(self) -> dict[str, Any]:
        """The options a stored schema was inferred with; a schema inferred under other ones
        does not describe what this reader would infer."""
        return {
            "format": self.format,
            "infer_column_types": self.infer_column_types,
            "multi_line": self.multi_line,
            "header": self.header,
        }


# Auto Loader's listing options, with the one value that says what this ingestion does anyway:
# list the whole folder each run (no notifications, no incremental listing), existing files included.
_LISTED_ANYWAY = {"useNotifications": "false", "includeExistingFiles": "true", "useIncrementalListing": "false",
                  "validateOptions": "true"}

_AUTO_LOADER_NAMES: Mapping[str, tuple[str, str]] = {
    "format": ("format", "str"),
    "schemaHints": ("schema_hints", "str"),
    "inferColumnTypes": ("infer_column_types", "bool"),
    "schemaEvolutionMode": ("schema_evolution_mode", "str"),
    "maxFilesPerTrigger": ("max_files_per_trigger", "int"),
    "maxBytesPerTrigger": ("max_bytes_per_trigger", "str"),
    "schemaInference.sampleSize.numFiles": ("schema_inference_max_files", "int"),
    "pathGlobFilter": ("path_glob_filter", "str"),
    "multiLine": ("multi_line", "bool"),
    "multiline": ("multi_line", "bool"),
    "header": ("header", "bool"),
}


def _convert(key: str, value: Any, kind: str) -> Any:
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in {"true", "false"}:
            return text == "true"
        raise IngestionOptionsError(f"Option {key} must be true or false, got {value!r}")
    if kind == "int":
        try:
            return int(value)
        except (TypeError, ValueError) as exc:
            raise IngestionOptionsError(f"Option {key} must be a whole number, got {value!r}") from exc
    return str(value)


def parse_byte_size(value: int | str, *, option: str = "size") -> int:
    """Bytes from a number or a size like ``"10g"``, ``"512mb"``, ``"64KiB"`` (powers of 1024)."""
    if isinstance(value, bool):
        raise IngestionOptionsError(f"{option} must be a size such as 10g or 1048576, got {value!r}")
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise IngestionOptionsError(f"{option} must be a size such as 10g or 1048576, got {value!r}")
        size = int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
    if size < 1:
        raise IngestionOptionsError(f"{option} must be positive, got {value!r}")
    return size

