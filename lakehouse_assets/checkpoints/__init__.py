"""Structured Streaming checkpoints: read and checked as Spark reads them, checked against the
tables their queries write and read, reported on and rebuilt from those tables.

The one place that reads (and, to repair, writes) Spark's and Delta Lake's own on-disk formats,
which no public interface answers (``docs/reliability.md`` says what and why): Spark's
checkpoint logs (:mod:`.logs`) and Delta's source offsets and commit files
(:mod:`.delta_offsets`), each checked for the format version it was written for.
Everything else, ``storage/`` included, speaks Spark's and Delta's public APIs.
"""
