"""What an AUTO CDC flow is asked to do, with Lakeflow's names: how a feed of change rows is
applied to a target table as SCD type 1 or type 2 (docs/guides/cdc.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from lakehouse_assets.errors import ConfigurationError

#: History columns of an SCD type 2 table: the sequence value that opened a row's version,
#: and the one that closed it (null while it is current).
START_AT = "__START_AT"
END_AT = "__END_AT"


@dataclass(frozen=True)
class AutoCdc:
    """How change rows are applied to a table.

    ``keys`` identify a row; ``sequence_by`` orders the changes of a key (a change with a
    lower sequence than one already applied never overwrites it); ``apply_as_deletes`` is a
    SQL condition on a change row that makes it a delete; ``apply_as_truncates`` (type 1
    only) one that empties the table; ``except_column_list`` names change columns the table
    does not keep (the operation column, typically); ``track_history_column_list`` (type 2)
    names the columns whose changes open a new version, the others being updated in place.
    """

    keys: Sequence[str]
    sequence_by: str
    stored_as_scd_type: Literal[1, 2] = 1
    apply_as_deletes: str | None = None
    apply_as_truncates: str | None = None
    except_column_list: Sequence[str] = ()
    track_history_column_list: Sequence[str] | None = None
    column_list: Sequence[str] | None = None
    track_history_except_column_list: Sequence[str] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", tuple(self.keys))
        object.__setattr__(self, "except_column_list", tuple(self.except_column_list))
        for optional in ("track_history_column_list", "column_list", "track_history_except_column_list"):
            if getattr(self, optional) is not None:
                object.__setattr__(self, optional, tuple(getattr(self, optional)))
        if not self.keys:
            raise ConfigurationError("AUTO CDC needs at least one key column (keys=[...])")
        if self.stored_as_scd_type not in (1, 2):
            raise ConfigurationError(f"stored_as_scd_type is {self.stored_as_scd_type!r}: use 1 or 2")
        if self.apply_as_truncates and self.stored_as_scd_type != 1:
            raise ConfigurationError("apply_as_truncates is for SCD type 1 tables only, as in Lakeflow")
        tracking = [self.track_history_column_list, self.track_history_except_column_list]
        if any(t is not None for t in tracking) and self.stored_as_scd_type != 2:
            raise ConfigurationError("track_history_column_list is for SCD type 2 tables only")
        if all(t is not None for t in tracking):
            raise ConfigurationError("give track_history_column_list or track_history_except_column_list, not both")
        if self.column_list is not None and self.except_column_list:
            raise ConfigurationError("give column_list or except_column_list, not both")
        excluded = set(self.except_column_list)
        if excluded & set(self.keys):
            raise ConfigurationError(f"except_column_list {sorted(excluded & set(self.keys))} names key columns")

    @property
    def row_identity(self) -> list[str]:
        """The columns naming one row of the table: the keys (type 1), or the keys and the
        sequence that opened the version (type 2)."""
        return list(self.keys) if self.stored_as_scd_type == 1 else [*self.keys, START_AT]

    def kept_columns(self, change_columns: Sequence[str]) -> list[str]:
        """The change columns the table keeps, in the feed's order (keys included)."""
        missing = [c for c in (*self.keys, self.sequence_by) if c not in change_columns]
        if missing:
            raise ConfigurationError(
                f"AUTO CDC columns {missing} are not in the change feed (its columns: {list(change_columns)})")
        if self.column_list is not None:
            unknown = [c for c in self.column_list if c not in change_columns]
            if unknown:
                raise ConfigurationError(f"column_list names {unknown}, which the change feed does not have")
            return [c for c in change_columns if c in self.column_list or c in self.keys]
        return [c for c in change_columns if c not in self.except_column_list]

    def tracked_columns(self, change_columns: Sequence[str]) -> list[str]:
        """The kept columns whose change opens a new version (type 2)."""
        kept = [c for c in self.kept_columns(change_columns) if c not in self.keys and c != self.sequence_by]
        if self.track_history_except_column_list is not None:
            return [c for c in kept if c not in self.track_history_except_column_list]
        if self.track_history_column_list is None:
            return kept
        unknown = [c for c in self.track_history_column_list if c not in kept]
        if unknown:
            raise ConfigurationError(f"track_history_column_list names {unknown}, which the table does not keep")
        return list(self.track_history_column_list)
