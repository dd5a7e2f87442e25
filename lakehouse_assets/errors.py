"""One error root for the project. Messages name what failed and what to do next."""

from __future__ import annotations

from collections.abc import Collection


class LakehouseError(Exception):
    """Base of every error lakehouse_assets raises on purpose."""


class ConfigurationError(LakehouseError):
    """A setting is missing or malformed."""


class TableNotFoundError(LakehouseError):
    """A Delta table was read before anything wrote it."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"No Delta table at {path}: nothing has been written there yet. "
            "Materialize the asset that writes this table first, or check LAKEHOUSE_ROOT."
        )
        self.path = path


class UnknownTableError(LakehouseError):
    """A table named ``layer.name`` that the lakehouse does not have: how it gets built when
    it is ``declared`` (an asset of the definitions), else the closest table there is."""

    def __init__(self, name: str, root: str, known: list[str], declared: Collection[str] = ()) -> None:
        listed = ", ".join(known) if known else "none yet: they appear as their assets materialize"
        if name in declared:
            how = (f" It is built by its asset's first materialization once its source has landed: "
                   f"`dagster asset materialize -m lakehouse_assets --select {name.replace('.', '/')}`.")
        else:
            similar = similar_table(name, known)
            how = f" Did you mean {similar}?" if similar else ""
        super().__init__(f"No table {name} in the lakehouse at {root}.{how} Its tables: {listed} "
                         "(`lakehouse status` lists them with their versions).")
        self.name = name
        self.root = root
        self.known = known


def similar_table(name: str, known: list[str]) -> str | None:
    """The known table most like ``name``: the same table in another layer, else the closest spelling."""
    import difflib

    table = name.rpartition(".")[2]
    same_name = [k for k in known if k.rpartition(".")[2] == table]
    if same_name:
        return same_name[0]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return close[0] if close else None


class NotADeltaTableError(LakehouseError):
    """A write targeted a non-empty folder that has no Delta log."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"{path} is not empty and is not a Delta table (it has no _delta_log folder). "
            "Refusing to write there: move its files away or choose another table path."
        )


class SchemaMismatchError(LakehouseError):
    """A batch's schema cannot be written into a table."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"Schema mismatch writing {path}: {message}")
        self.path = path


class QueryFailedError(LakehouseError):
    """A streaming query stopped on one of the project's own errors, raised inside it (by the
    sink or the source); ``kind`` names that error's class, the message is its own."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")


class ExpectationFailedError(LakehouseError):
    """A row failed an expectation whose violation fails the update (FAIL / FAIL UPDATE):
    nothing of the batch was committed. One line, so it survives a query's traceback."""

    def __init__(self, rule: str, table: str, condition: str, row: str, failing_rows: int) -> None:
        super().__init__(
            f"Expectation {rule} failed on {table}: {failing_rows} row(s) of the batch violate {condition}, "
            f"e.g. {row}. Nothing was committed to {table}. Fix the data upstream (or make the rule drop "
            "or warn instead of failing the update), then run the asset again."
        )


class CorruptCheckpointError(LakehouseError):
    """A streaming query's checkpoint has a file Spark cannot read."""

    def __init__(self, checkpoint: str, file: str, problem: str, table_name: str | None = None) -> None:
        target = table_name or "<layer.name>"
        super().__init__(
            f"The checkpoint {checkpoint} is damaged: {file} {problem}. Spark cannot resume the "
            f"query from it. Full-refresh the table with `lakehouse reset {target}` (it deletes "
            f"the table and this checkpoint), then run it again: it is rebuilt from its source."
        )


class TableBusyError(LakehouseError):
    """Another run holds a table's write lock."""


class SourceRecreatedError(LakehouseError):
    """A table a streaming query reads was dropped or recreated under its checkpoint."""


class VacuumRefusedError(LakehouseError):
    """A VACUUM would delete data files that a streaming query reading the table has yet to read."""


class EngineUnavailableError(LakehouseError):
    """No Spark Connect engine answers at the configured URL, or it refused this client."""

    def __init__(self, url: str, problem: str) -> None:
        super().__init__(
            f"No Spark engine answers at {url}: {problem}. Start one with `lakehouse engine start` "
            "(or point LAKEHOUSE_SPARK_REMOTE at a running one), or unset LAKEHOUSE_SPARK_REMOTE to "
            "run Spark embedded."
        )


class EngineStartError(LakehouseError):
    """The managed Spark Connect engine could not be started."""


def failure_text(error: BaseException) -> str:
    """``error``'s text, then its causes': a streaming query whose sink is Spark's own (no
    Python in the batch) names the error its plan raised only in a cause. Classic PySpark
    keeps each converted cause as ``_cause``; Spark Connect sends the server's stack trace,
    whose ``Caused by:`` lines carry the messages."""
    parts = [str(error)]
    seen = {id(error)}
    cause = getattr(error, "_cause", None) or error.__cause__
    while isinstance(cause, BaseException) and id(cause) not in seen:
        seen.add(id(cause))
        parts.append(str(cause))
        cause = getattr(cause, "_cause", None) or cause.__cause__
    stack_trace = getattr(error, "getStackTrace", None)
    server_trace = stack_trace() if callable(stack_trace) else None
    if isinstance(server_trace, str):
        parts.append(server_trace)
    return "\n".join(parts)
