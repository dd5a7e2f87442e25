"""Silver: the admissions kept, declared in SQL."""

from pathlib import Path

from lakehouse_assets.assets.sql_asset import sql_asset

admissions_clean = sql_asset(Path(__file__).parent / "sql" / "admissions_clean.sql")
