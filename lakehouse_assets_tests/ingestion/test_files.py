"""Which landed files are data, the glob Spark is given for that, and listing landing folders."""

from __future__ import annotations

import itertools
import os
import random
import re
from pathlib import Path

import pytest

from lakehouse_assets.ingestion.files import (
    data_file_glob,
    glob_matches,
    is_data_file,
    list_data_files,
    local_file_path,
)
from lakehouse_assets.location import spark_file_uri


@pytest.mark.parametrize(
    ("name", "is_data"),
    [
        ("0001.json", True),
        ("recordings.jsonl", True),
        ("x", True),
        ("tmp", True),
        ("a.tmpx", True),
        ("partial.json", True),
        ("a.tmp.json", True),
        ("_SUCCESS", False),
        ("_metadata", False),
        (".0001.json.1234.tmp", False),
        ("0001.json.tmp", False),
        ("0001.json.partial", False),
        (".tmp", False),
        (".partial", False),
    ],
)
def test_in_progress_and_hidden_names_are_not_data(name: str, is_data: bool) -> None:
    assert is_data_file(name) is is_data


def _hadoop_glob_regex(glob: str) -> re.Pattern[str]:
    """Hadoop's GlobPattern translation, for the constructs data_file_glob uses ({ , } ? * [^])."""
    table = {"{": "(?:", ",": "|", "}": ")", "?": ".", "*": ".*", ".": r"\."}
    return re.compile("".join(table.get(c, c) for c in glob) + r"\Z", re.S)


def test_the_glob_spark_is_given_accepts_exactly_the_data_names() -> None:
    glob = data_file_glob()
    as_hadoop_reads_it = _hadoop_glob_regex(glob)
    # Every name of up to 5 of the characters that matter, and random longer ones: the glob
    # spells out names up to 8 characters by length, and longer ones by their last 8.
    alphabet = "_.tmparilx"
    names = ["".join(t) for n in range(1, 6) for t in itertools.product(alphabet, repeat=n)]
    rng = random.Random(7)
    names += ["".join(rng.choice(alphabet) for _ in range(rng.randint(6, 14))) for _ in range(100_000)]
    names += [n + "pad" + tail for n in ("a", "_", ".") for tail in (".tmp", ".partial", ".json", "partial", "p")]
    mismatches = [n for n in names if bool(as_hadoop_reads_it.match(n)) != is_data_file(n)]
    assert mismatches == []


def test_glob_matching_handles_braces_and_negated_classes() -> None:
    assert [n for n in ("abf", "acdf", "acef", "acf", "af") if glob_matches(n, "a{b,c{d,e}}f")] == ["abf", "acdf", "acef"]
    assert glob_matches("2024-01/part-1.json", "2024-*/part-{1,2}.json")
    assert not glob_matches("2024-01/part-3.json", "2024-*/part-{1,2}.json")
    assert glob_matches("a.json", "[^_]*.json") and not glob_matches("_a.json", "[^_]*.json")


def test_listing_skips_hidden_in_progress_and_hidden_folders(tmp_path: Path) -> None:
    for name in ["b.json", "a.json", "_SUCCESS", ".a.json.tmp", "c.json.partial", "sub/d.json", "_tmp/e.json"]:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n")
    os.utime(tmp_path / "b.json", (1_000, 1_000))

    top = list_data_files(str(tmp_path))
    deep = list_data_files(str(tmp_path), recursive=True)
    only_a = list_data_files(str(tmp_path), path_glob_filter="a*")

    assert [f.relative_path for f in top] == ["b.json", "a.json"]  # oldest first
    assert sorted(f.relative_path for f in deep) == ["a.json", "b.json", "sub/d.json"]
    assert [f.relative_path for f in only_a] == ["a.json"]
    assert top[1].path == "file:" + str(tmp_path / "a.json") and top[1].size == 3
    assert list_data_files(str(tmp_path / "missing")) == []


def test_paths_are_spelt_as_spark_spells_them() -> None:
    assert spark_file_uri("/data/x.json") == "file:/data/x.json"
    assert spark_file_uri("file:///data/x.json") == "file:/data/x.json"
    assert spark_file_uri("file:/data/a%20b.json") == "file:/data/a%20b.json"
    assert spark_file_uri("/data/a b.json") == "file:/data/a%20b.json"
    assert spark_file_uri("s3://bucket/x.json") == "s3://bucket/x.json"


@pytest.mark.parametrize(("value", "path"), [
    ("file:///lake/landing/recordings/r-1.json", "/lake/landing/recordings/r-1.json"),
    ("file:/lake/landing/recordings/r-1.json", "/lake/landing/recordings/r-1.json"),
    ("file:///lake/landing/my%20files/r%231.json", "/lake/landing/my files/r#1.json"),
    ("/lake/landing/recordings/./r-1.json", "/lake/landing/recordings/r-1.json"),
])
def test_source_file_values_become_local_paths(value: str, path: str) -> None:
    assert local_file_path(value) == path
