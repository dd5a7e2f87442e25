"""The reference pipeline's assets, a module per medallion layer, and the table-asset machinery."""
