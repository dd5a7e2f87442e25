"""AutoLoaderOptions: typed fields, Auto Loader's option names, and refusals that name the option."""

from __future__ import annotations

import pytest

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.ingestion import AutoLoaderOptions, IngestionOptionsError
from lakehouse_assets.ingestion.options import parse_byte_size


def test_auto_loader_option_names_map_to_fields() -> None:
    options = AutoLoaderOptions.from_options(
        {
            "cloudFiles.format": "csv",
            "cloudFiles.schemaHints": "time DOUBLE, mrn BIGINT",
            "cloudFiles.inferColumnTypes": "true",
            "cloudFiles.schemaEvolutionMode": "rescue",
            "cloudFiles.maxFilesPerTrigger": "25",
            "cloudFiles.schemaInference.sampleSize.numFiles": 10,
            "header": True,
            "multiLine": "false",
            "pathGlobFilter": "*.csv",
            "sep": ";",
        }
    )
    assert options == AutoLoaderOptions(
        format="csv",
        schema_hints="time DOUBLE, mrn BIGINT",
        infer_column_types=True,
        schema_evolution_mode="rescue",
        max_files_per_trigger=25,
        schema_inference_max_files=10,
        header=True,
        path_glob_filter="*.csv",
        reader_options={"sep": ";"},
    )


def test_defaults_are_auto_loaders() -> None:
    options = AutoLoaderOptions()
    assert (options.format, options.infer_column_types, options.schema_evolution_mode) == ("json", False, "addNewColumns")
    assert options.rate_limit() == {"maxFilesPerTrigger": "1000"}
    assert AutoLoaderOptions(max_bytes_per_trigger="10g").rate_limit() == {"maxBytesPerTrigger": str(10 * 1024**3)}


@pytest.mark.parametrize(
    ("text", "size"),
    [("1024", 1024), ("64k", 65536), ("512mb", 512 * 1024**2), ("10g", 10 * 1024**3), ("2 GiB", 2 * 1024**3), (7, 7)],
)
def test_byte_sizes(text: str | int, size: int) -> None:
    assert parse_byte_size(text) == size


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"format": "xml"}, "xml"),
        ({"schema_evolution_mode": "addNewColumn"}, "addNewColumn"),
        ({"max_files_per_trigger": 10, "max_bytes_per_trigger": "1g"}, "maxBytesPerTrigger"),
        ({"max_files_per_trigger": 0}, "maxFilesPerTrigger"),
        ({"max_bytes_per_trigger": "lots"}, "maxBytesPerTrigger"),
        ({"continue_on_new_columns": True, "schema_evolution_mode": "rescue"}, "continue_on_new_columns"),
        ({"reader_options": {"allowComents": "true"}}, "allowComents"),
        ({"format": "csv", "reader_options": {"sep": "::"}}, "sep"),
    ],
)
def test_bad_options_are_refused_naming_the_option(kwargs: dict, names: str) -> None:
    with pytest.raises(IngestionOptionsError, match=names) as caught:
        AutoLoaderOptions(**kwargs)
    assert isinstance(caught.value, ConfigurationError)


def test_options_that_cannot_apply_here_are_refused() -> None:
    with pytest.raises(IngestionOptionsError, match="schemaLocation"):
        AutoLoaderOptions.from_options({"cloudFiles.schemaLocation": "/x"})
    with pytest.raises(IngestionOptionsError, match="inferColumnTypes"):
        AutoLoaderOptions.from_options({"cloudFiles.inferColumnTypes": "yes"})


def test_reader_options_cannot_be_changed_afterwards() -> None:
    options = AutoLoaderOptions(reader_options={"allowComments": "true"})
    with pytest.raises(TypeError):
        options.reader_options["allowComments"] = "false"  # type: ignore[index]
