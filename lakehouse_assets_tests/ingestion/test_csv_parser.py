"""The header-aware CSV parser that runs on the executors (pure Python, no Spark)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from lakehouse_assets.ingestion._csv import (
    CsvDialect,
    header_names,
    parse_csv_batches,
    parse_document,
    parse_line,
)
from lakehouse_assets.location import ObjectStore

HEADER = CsvDialect(header=True)


def _batch(rows: list[tuple[str, str, int]]) -> pa.RecordBatch:
    values, files, blocks = zip(*rows, strict=True)
    return pa.RecordBatch.from_pydict({"value": list(values), "_source_file": list(files), "_block_start": list(blocks)})


def _records(batches: list[pa.RecordBatch], dialect: CsvDialect, multi_line: bool = False) -> list[dict]:
    return [row for out in parse_csv_batches(iter(batches), dialect, multi_line, ObjectStore()) for row in out.to_pylist()]


def test_each_file_is_read_by_its_own_header() -> None:
    out = _records(
        [
            _batch([("mrn,name", "a.csv", 0), ("1,ann", "a.csv", 0), ("", "a.csv", 0), ("name,mrn,age", "b.csv", 0)]),
            _batch([("bob,2,40", "b.csv", 0)]),
        ],
        HEADER,
    )
    assert [(r["_source_file"], dict(r["_fields"]), r["_malformed"]) for r in out] == [
        ("a.csv", {"mrn": "1", "name": "ann"}, False),
        ("b.csv", {"name": "bob", "mrn": "2", "age": "40"}, False),
    ]


def test_a_later_split_of_a_file_reads_the_header_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_bytes(b"\xef\xbb\xbfmrn,name\n1,ann\n2,bob\n")
    out = _records([_batch([("2,bob", "file:" + str(path), 13)])], HEADER)
    assert [dict(r["_fields"]) for r in out] == [{"mrn": "2", "name": "bob"}]


def test_malformed_lines_keep_their_text() -> None:
    names = ["a", "b"]
    assert parse_line("1,2,3", names, HEADER) == ("1,2,3", [("a", "1"), ("b", "2")], True)
    assert parse_line("1", names, HEADER) == ("1", [("a", "1")], True)
    assert parse_line('"open,2', names, HEADER) == ('"open,2', None, True)
    assert parse_line(",x", names, HEADER) == (",x", [("a", None), ("b", "x")], False)


def test_without_header_columns_are_named_by_position() -> None:
    assert parse_line("1,2", None, CsvDialect()) == ("1,2", [("_c0", "1"), ("_c1", "2")], False)


def test_a_whole_file_with_quoted_line_breaks() -> None:
    text = '\ufeffid,note\r\n1,"two\r\nlines"\r\n\r\n2,plain\r\n3,"broken"x\r\n'
    assert list(parse_document(text, HEADER)) == [
        ('1,"two\r\nlines"', [("id", "1"), ("note", "two\r\nlines")], False),
        ("2,plain", [("id", "2"), ("note", "plain")], False),
        ('3,"broken"x', None, True),
    ]


def test_header_names_are_made_unique_as_spark_does() -> None:
    assert header_names(["a", "", "A", "b "]) == ["a0", "_c1", "A2", "b"]


def test_dialect_options_are_honoured() -> None:
    dialect = CsvDialect(header=True, sep=";", quote="'", null_value="NA")
    assert parse_line("'x;y';NA", ["a", "b"], dialect) == ("'x;y';NA", [("a", "x;y"), ("b", None)], False)
