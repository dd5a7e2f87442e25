"""A routed SQL table's query read over its streamed source as a view, without Spark: the
query's own text kept, the stream replaced by the view under the name the query calls it,
the streamed row added to the outer SELECT; shapes whose rows could not be kept as they
came are refused by name. (Run by Spark in lakehouse_assets_tests/io/test_replay_sql.py.)"""

from __future__ import annotations

import pytest

from lakehouse_assets.tables.sql_definition import SqlDefinitionError, parse_sql_definition
from lakehouse_assets.tables.sql_lineage import column_lineage
from lakehouse_assets.tables.sql_stream_view import SOURCE_ROW, over_stream_view

VIEW = "_stream_view"


def over_view(query: str) -> str:
    definition = parse_sql_definition(f"CREATE OR REFRESH STREAMING TABLE silver.t AS {query}", source="t.sql")
    streamed = over_stream_view(definition, VIEW)
    assert (streamed.stream, streamed.view) == ("bronze.admissions", VIEW)
    return streamed.query


def test_the_stream_is_read_from_the_view_by_the_name_the_query_gives_it() -> None:
    assert over_view("SELECT id, upper(ward) AS ward FROM STREAM(bronze.admissions) WHERE admissions.id > 0") == (
        f"SELECT id, upper(ward) AS ward , STRUCT(`admissions`.*) AS {SOURCE_ROW} "
        f"FROM `{VIEW}` AS `admissions` WHERE admissions.id > 0")
    assert over_view("SELECT a.id, w.name, extract(YEAR FROM a.admitted) AS y FROM STREAM bronze.admissions a "
                     "LEFT JOIN silver.wards w ON a.ward = w.ward") == (
        f"SELECT a.id, w.name, extract(YEAR FROM a.admitted) AS y , STRUCT(`a`.*) AS {SOURCE_ROW} "
        f"FROM `{VIEW}` a LEFT JOIN silver.wards w ON a.ward = w.ward")
    assert over_view("WITH w AS (SELECT * FROM silver.wards) SELECT * FROM w JOIN STREAM(bronze.admissions) AS s "
                     "USING (ward)") == (
        f"WITH w AS (SELECT * FROM silver.wards) SELECT * , STRUCT(`s`.*) AS {SOURCE_ROW} "
        f"FROM w JOIN `{VIEW}` AS s USING (ward)")


@pytest.mark.parametrize(("query", "why"), [
    ("SELECT * FROM (SELECT * FROM STREAM(bronze.admissions))", "does not read bronze.admissions itself"),
    ("SELECT DISTINCT ward FROM STREAM(bronze.admissions)", "SELECT DISTINCT"),
    ("SELECT id FROM STREAM(bronze.admissions) UNION ALL SELECT id FROM silver.wards", "UNION"),
    ("SELECT a.id FROM STREAM(bronze.admissions) a JOIN STREAM(bronze.wards) w ON a.ward = w.ward",
     r"reads 2 tables as streams \(bronze.admissions, bronze.wards\)"),
])
def test_a_query_whose_rows_cannot_be_kept_as_they_came_is_refused_by_name(query: str, why: str) -> None:
    definition = parse_sql_definition(f"CREATE OR REFRESH STREAMING TABLE silver.t AS {query}", source="t.sql")
    with pytest.raises(SqlDefinitionError, match=f"t.sql: silver.t drops rows.*{why}"):
        over_stream_view(definition, VIEW)


def test_column_lineage_reads_through_either_spelling_of_stream() -> None:
    assert column_lineage("SELECT a.id, w.name FROM STREAM bronze.admissions a JOIN silver.wards w USING (ward)",
                          ["bronze.admissions", "silver.wards"]) == {
        "id": [("bronze.admissions", "id")], "name": [("silver.wards", "name")]}
