"""AUTO CDC in SQL: CREATE OR REFRESH STREAMING TABLE, then CREATE FLOW ... AS AUTO CDC INTO,
parsed into the same AutoCdc a Python asset declares; malformed definitions refused by name."""

from __future__ import annotations

import pytest

from lakehouse_assets.assets.sql_asset import SQL_FOLDER
from lakehouse_assets.cdc import AutoCdc
from lakehouse_assets.tables.sql_auto_cdc import is_auto_cdc, parse_auto_cdc
from lakehouse_assets.tables.sql_definition import SqlDefinitionError

FULL = """
-- a comment is fine
CREATE OR REFRESH STREAMING TABLE silver.people COMMENT 'People, as they changed';
CREATE FLOW people_cdc AS AUTO CDC INTO silver.people
FROM STREAM(bronze.people_changes)
KEYS (id, region)
APPLY AS DELETE WHEN op = 'DELETE' AND region IS NOT NULL
SEQUENCE BY seq
COLUMNS * EXCEPT (op, seq)
STORED AS SCD TYPE 2
TRACK HISTORY ON * EXCEPT (city);
"""


def test_every_clause_is_read() -> None:
    parsed = parse_auto_cdc(FULL, "people.sql")
    assert (parsed.table, parsed.comment, parsed.flow, parsed.changes_from) == (
        "silver.people", "People, as they changed", "people_cdc", "bronze.people_changes")
    assert parsed.spec == AutoCdc(keys=["id", "region"], sequence_by="seq", stored_as_scd_type=2,
                                  apply_as_deletes="op = 'DELETE' AND region IS NOT NULL",
                                  except_column_list=["op", "seq"], track_history_except_column_list=["city"])


def test_defaults_and_column_lists() -> None:
    parsed = parse_auto_cdc("""
        CREATE OR REFRESH STREAMING TABLE silver.people;
        CREATE FLOW f AS AUTO CDC INTO silver.people FROM STREAM(bronze.changes)
        SEQUENCE BY seq KEYS (id) COLUMNS (id, name) APPLY AS TRUNCATE WHEN op = 'TRUNCATE'
    """, "people.sql")
    assert parsed.spec.stored_as_scd_type == 1 and parsed.comment is None
    assert parsed.spec.column_list == ("id", "name") and parsed.spec.apply_as_truncates == "op = 'TRUNCATE'"
    assert parsed.spec.kept_columns(["id", "name", "city", "seq"]) == ["id", "name"]


def test_the_reference_history_is_an_auto_cdc_file() -> None:
    text = (SQL_FOLDER / "patients_history.sql").read_text()
    assert is_auto_cdc(text)
    parsed = parse_auto_cdc(text, "patients_history.sql")
    assert parsed.spec.stored_as_scd_type == 2 and parsed.spec.keys == ("mrn",)
    assert dict(parsed.properties) == {"delta.enableChangeDataFeed": "true"}
    assert not is_auto_cdc((SQL_FOLDER / "device_counts.sql").read_text())
    assert [c.name for c in parsed.columns] == ["mrn", "name", "__START_AT", "__END_AT"]
    assert all(c.comment for c in parsed.columns)


def test_columns_are_described_after_the_tables_name() -> None:
    parsed = parse_auto_cdc("""
        CREATE OR REFRESH STREAMING TABLE silver.people (id BIGINT COMMENT 'Who', name COMMENT 'Called')
        TBLPROPERTIES (delta.enableChangeDataFeed = true) CLUSTER BY (id);
        CREATE FLOW f AS AUTO CDC INTO silver.people FROM STREAM(bronze.changes) KEYS (id) SEQUENCE BY seq
    """, "people.sql")
    assert [(c.name, c.type, c.comment) for c in parsed.columns] == [("id", "bigint", "Who"), ("name", "", "Called")]
    assert dict(parsed.properties) == {"delta.enableChangeDataFeed": "true"}
    assert (parsed.clustered_by, parsed.partitioned_by) == (("id",), ())


@pytest.mark.parametrize("text, message", [
    ("CREATE OR REFRESH STREAMING TABLE silver.t (CONSTRAINT c EXPECT (id > 0)); CREATE FLOW f AS AUTO CDC "
     "INTO silver.t FROM STREAM(bronze.c) KEYS (id) SEQUENCE BY s", "does not take"),
    ("CREATE FLOW f AS AUTO CDC INTO silver.t FROM STREAM(bronze.c) KEYS (id) SEQUENCE BY s", "1 statement"),
    ("CREATE OR REFRESH STREAMING TABLE silver.t; CREATE FLOW f AS AUTO CDC INTO silver.u "
     "FROM STREAM(bronze.c) KEYS (id) SEQUENCE BY s", "writes silver.u, but the file creates silver.t"),
    ("CREATE OR REFRESH STREAMING TABLE silver.t; CREATE FLOW f AS AUTO CDC INTO silver.t "
     "FROM STREAM(bronze.c) SEQUENCE BY s", "no KEYS clause"),
    ("CREATE OR REFRESH STREAMING TABLE silver.t; CREATE FLOW f AS AUTO CDC INTO silver.t "
     "FROM STREAM(bronze.c) KEYS (id)", "no SEQUENCE BY clause"),
    ("CREATE OR REFRESH STREAMING TABLE silver.t; CREATE FLOW f AS AUTO CDC INTO silver.t "
     "FROM bronze.c KEYS (id) SEQUENCE BY s", "must read its changes FROM STREAM"),
    ("CREATE OR REFRESH STREAMING TABLE silver.t; CREATE FLOW f AS AUTO CDC INTO silver.t "
     "FROM STREAM(bronze.c) KEYS (id) SEQUENCE BY s STORED AS SCD TYPE 3", "takes 1 or 2"),
    ("CREATE OR REFRESH STREAMING TABLE silver.t; CREATE FLOW f AS AUTO CDC INTO silver.t "
     "FROM STREAM(bronze.c) KEYS id SEQUENCE BY s", "KEYS takes column names in parentheses"),
    ("CREATE OR REFRESH STREAMING TABLE silver.t; CREATE FLOW f AS AUTO CDC INTO silver.t "
     "FROM STREAM(bronze.c) KEYS (id) KEYS (id) SEQUENCE BY s", "repeats a clause"),
    ("CREATE OR REFRESH STREAMING TABLE silver.t; CREATE FLOW f AS AUTO CDC INTO silver.t "
     "FROM STREAM(bronze.c) KEYS (id) SEQUENCE BY s TRACK HISTORY ON (name)", "SCD type 2 tables only"),
    ("CREATE OR REFRESH STREAMING TABLE silver.t LOCATION '/x'; CREATE FLOW f AS AUTO CDC INTO silver.t "
     "FROM STREAM(bronze.c) KEYS (id) SEQUENCE BY s", "only COMMENT, TBLPROPERTIES, PARTITIONED BY and CLUSTER BY"),
])
def test_a_malformed_definition_is_refused_by_name(text: str, message: str) -> None:
    with pytest.raises(SqlDefinitionError, match=rf"people\.sql: .*{message}"):
        parse_auto_cdc(text, "people.sql")
