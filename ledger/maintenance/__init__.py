"""Table maintenance: merges, vacuum, partition drops and rewrites (see docs/merges.md)."""
