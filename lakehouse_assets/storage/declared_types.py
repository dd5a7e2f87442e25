"""The column types a table's definition declares, held to by every write (:class:`DeclaredTypes`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from lakehouse_assets.errors import SchemaMismatchError
from lakehouse_assets.storage._schema import fits, same_type, storable_rows, type_sql


@dataclass(frozen=True)
class DeclaredTypes:
    """The column types the definition of ``table`` (``layer.name``) declares (``name TYPE``
    in its SQL, a typed ``DescribedColumn``), by column name. Every write casts the rows'
    columns to them (:meth:`fitted`); columns declared without a type, or not declared, are
    left as the query makes them."""

    table: str
    types: Mapping[str, T.DataType]

    def fitted(self, df: DataFrame, path: str) -> DataFrame:
        """``df`` with each declared column cast to its declared type where its own type
        :func:`fits` it; raises :class:`~lakehouse_assets.errors.SchemaMismatchError` naming
        the table, the column and both types where it does not, or naming the declared
        columns ``df`` lacks."""
        produced = {f.name.lower(): f for f in df.schema.fields}
        missing = [name for name in self.types if name.lower() not in produced]
        if missing:
            raise SchemaMismatchError(path, (
                f"{self.table} declares columns {missing} with types, and its query does not make them "
                f"(it makes {df.columns}). Name them in the query (... AS {missing[0]}), or take them out "
                "of the declaration."))
        casts: dict[str, T.DataType] = {}
        for name, declared in self.types.items():
            made = produced[name.lower()]
            if same_type(made.dataType, declared):
                continue
            if not (isinstance(made.dataType, T.NullType) or fits(made.dataType, declared)):
                raise SchemaMismatchError(path, (
                    f"{self.table} declares column {name!r} {declared.simpleString()}, and its query makes "
                    f"it {made.dataType.simpleString()}, which a cast to {declared.simpleString()} could "
                    f"change. Cast it in the query (CAST(... AS {type_sql(declared).upper()})) if that is "
                    f"meant, or declare it {made.dataType.simpleString().upper()}."))
            casts[made.name] = declared
        return storable_rows(df, casts) if casts else df
