"""The text of an exported SDP project's files (:mod:`.export`), rendered from plain values:
nothing here imports the project's assets or Spark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

#: The spec's configuration keys the exported files read the lakehouse's folders from.
LANDING_CONF = "lakehouse.landing"
ROOT_CONF = "lakehouse.root"
PIPELINE_NAME = "lakehouse"

_HEADER = '''"""{table}: {description}

Exported by `lakehouse export-sdp` from {origin}.{note}
"""
'''


def _doc(text: str) -> str:
    return " ".join(text.replace('"""', "'''").replace("\\", "\\\\").split())


def bronze_file(*, table: str, description: str, source: str, file_format: str, schema: str,
                options: Mapping[str, str], metadata_columns: Mapping[str, str]) -> str:
    """A streaming table reading ``landing/<source>`` with Spark's file source, plus the ingestion's columns."""
    return _HEADER.format(table=table, description=_doc(description), origin="an Auto Loader bronze table", note=(
        "\n\nOpen-source SDP has no Auto Loader (cloudFiles): the files are read with Spark's own "
        f"{file_format} source and the table's schema as the lakehouse stores it. Its rescued data "
        "and line numbers are NULL: OSS Spark's file sources have neither.")) + f'''
from pyspark import pipelines as dp
from pyspark.sql import functions as F

LANDING = spark.conf.get("{LANDING_CONF}")  # noqa: F821 - spark-pipelines defines spark
SCHEMA = {schema!r}
OPTIONS = {dict(options)!r}


@dp.table(name={table!r}, comment={_doc(description)!r})
def {_function(table)}():
    return (spark.readStream.format({file_format!r}).schema(SCHEMA).options(**OPTIONS)  # noqa: F821
            .load(LANDING + {"/" + source!r})
            .select("*", {", ".join(f"{expression}.alias({name!r})" for name, expression in metadata_columns.items())}))
'''


def python_file(*, table: str, description: str, streaming: bool, module: str, attribute: str,
                inputs: Mapping[str, str], column_types: Mapping[str, str], note: str) -> str:
    """A streaming table or materialized view whose flow runs the asset's own transformation on ``inputs``."""
    decorator = "dp.table" if streaming else "dp.materialized_view"
    arguments = "".join(f"\n        {name}={expression}," for name, expression in inputs.items())
    return _HEADER.format(table=table, description=_doc(description), origin=f"{module}.{attribute}",
                          note=f"\n\n{note}" if note else "") + f'''
from pyspark import pipelines as dp

from lakehouse_assets.pipelines.sdp_flow import flow, with_schema

ROOT = spark.conf.get("{ROOT_CONF}")  # noqa: F821 - spark-pipelines defines spark


@{decorator}(name={table!r}, comment={_doc(description)!r})
def {_function(table)}():
    return flow(
        {module!r}, {attribute!r},{arguments}
        column_types={dict(column_types)!r},
    )
'''


def read_expression(table: str, *, streamed: bool, exported: bool, options: Mapping[str, str],
                    schema_json: str | None) -> str:
    """How a flow reads ``table``: by name when the pipeline has it, else the lakehouse's own
    Delta table by path (``ROOT``), as it stands; with the schema it has (``schema_json``),
    when known, so that reading its columns asks Spark nothing."""
    reader = "spark.readStream" if streamed else "spark.read"
    opts = "".join(f".option({k!r}, {v!r})" for k, v in options.items())
    if exported and not options:
        read = f"{reader}.table({table!r})"
    else:
        layer, name = table.split(".")
        read = f'{reader}.format("delta"){opts}.load(ROOT + {"/" + layer + "/" + name!r})'
    return f"with_schema({read}, {schema_json!r})" if schema_json else read


def sql_file(*, table: str, kind: str, comment: str | None, query: str, notes: Sequence[str]) -> str:
    """A SQL definition as OSS SDP takes it, with no ``USING`` (see :func:`spec_file`); ``comment``
    a SQL literal."""
    lines = [f"-- {table}: exported by `lakehouse export-sdp`.", *[f"-- {n}" for n in notes]]
    quoted = f"\nCOMMENT {comment}" if comment else ""
    return "\n".join(lines) + f"\nCREATE {kind} {table}{quoted}\nAS {query.strip()};\n"


def schemas_file(schemas: Sequence[str]) -> str:
    """Creates the schemas the datasets are named in, before any flow runs."""
    return f'''"""The schemas the datasets live in ({", ".join(schemas)}).

Open-source SDP neither creates a dataset's schema nor lets a pipeline file run CREATE SCHEMA
(UNSUPPORTED_PIPELINE_SPARK_SQL_COMMAND): that refusal is keyed to the registration context
spark-pipelines attaches to the requests of the thread importing the file, so the statements
run on a thread of their own, once, before the run starts.
"""

import threading

SCHEMAS = {list(schemas)!r}


def _create_schemas():
    for schema in SCHEMAS:
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {{schema}}")  # noqa: F821 - spark-pipelines defines spark


_thread = threading.Thread(target=_create_schemas)
_thread.start()
_thread.join()
'''


def spec_file(*, folder: Path, configuration: Mapping[str, str]) -> str:
    """``spark-pipeline.yml``: its storage in the folder, every file under transformations/.
    The datasets name no format (Delta is ``spark.sql.sources.default``): with ``format="delta"``
    the next run fails, SDP setting the table's ``provider`` property, which Delta refuses to
    alter (DELTA_CANNOT_CHANGE_PROVIDER); ``USING DELTA`` in capitals fails even the first run."""
    lines = [f"name: {PIPELINE_NAME}", f"storage: file://{folder / 'storage'}", "configuration:",
             *[f'  {key}: "{value}"' for key, value in configuration.items()],
             "libraries:", "  - glob:", "      include: transformations/**", ""]
    return "\n".join(lines)


def run_script(command: Sequence[str], environment: Mapping[str, str]) -> str:
    """``run.sh``: the exact command, from the folder (where the Hive metastore lives)."""
    exports = "".join(f'export {k}="{v}"\n' for k, v in environment.items())
    return ("#!/usr/bin/env bash\n# Runs the exported pipeline with pyspark's own spark-pipelines.\nset -euo pipefail\n"
            'cd "$(dirname "$0")"\n' + exports + " \\\n  ".join(_quoted(a) for a in command) + ' "$@"\n')


def _quoted(argument: str) -> str:
    return argument if all(c.isalnum() or c in "-_./=:," for c in argument) else f"'{argument}'"


def readme(*, exported: Sequence[tuple[str, str, str, str]], left_out: Sequence[tuple[str, str]],
           command: Sequence[str]) -> str:
    """README.md: what the folder holds, how to run it, and every table left out with why."""
    rows = "\n".join(f"| {table} | {kind} | {file} | {note or '-'} |" for table, kind, file, note in exported)
    missing = "\n".join(f"- **{table}**: {why}" for table, why in left_out) or "- none"
    return f"""# The lakehouse's asset graph as a Spark Declarative Pipelines project

Written by `lakehouse export-sdp`. Datasets are named `layer.name` (the layers are schemas), and
written as Delta tables in `spark-warehouse/` here, with a Hive metastore (Derby, `metastore_db/`)
in this folder so that a second run is incremental.

Run it from this folder with `./run.sh`, which is:

    {" ".join(_quoted(a) for a in command)}

Delta Lake's jars go on the command line (`--jars`) with its SQL extension and the Hive catalog:
those settings are static (a flow refuses them in the spec), and pyspark 4.2's spark-pipelines
hands its command line's settings to its Connect server in chunks of ten and keeps only the last
chunk (six are its own, `--jars` counts twice), so no more are given there; the session settings
are in `spark-pipeline.yml`'s `configuration`. The Python flows import `lakehouse_assets` and call
the tables' own transformations: `run.sh` sets `PYSPARK_PYTHON` to the interpreter that exported
the project and puts the project on `PYTHONPATH`.

OSS SDP creates no schemas and refuses `CREATE SCHEMA` in a pipeline file:
`transformations/_schemas.py` runs it on a thread of its own, outside the registration context the
refusal is keyed to. It also refuses any analysis inside a query function: each input of a Python
flow carries the schema the lakehouse's table has, so a transformation reading `df.columns` asks
Spark nothing.

## Exported

| table | as | file | differs |
|---|---|---|---|
{rows}

A streaming table of the lakehouse whose query groups at its top level is exported as a
materialized view: OSS SDP streams append only, and an aggregate without a watermark cannot be
appended; recomputed whole, it holds the same rows.

## Left out

{missing}
"""


def _function(table: str) -> str:
    return table.replace(".", "__")
