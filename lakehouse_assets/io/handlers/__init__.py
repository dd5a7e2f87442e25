"""One handler per kind of output a table asset returns: a batch DataFrame, a streaming
DataFrame, an ingestion source, rows routed to a quarantine, and the quarantine's report."""
