"""Publishing a ledger view to a Delta Lake table, incrementally and exactly once.

What is published: the visible rows of a table (``_row_id`` too for tables without a primary
key), or the totals of a rollup (one row per group, groups holding no rows left out). The first
publish creates the Delta table from the latest snapshot. Each later one reads the ledger's
change set since the version the Delta table holds (``ledger.changes``), takes the keys its
entries touch, reads the view's current rows of those keys, and applies one Delta MERGE. A key
may have several visible rows (blind inserts into a collapsing table), so source rows are never
paired with target rows one to one:

    source = one 'delete' row per changed key + the key's current rows tagged 'insert'
    MERGE ON <key columns equal> AND source.tag = 'delete'
      WHEN MATCHED THEN DELETE
      WHEN NOT MATCHED AND source.tag = 'insert' THEN INSERT

The ledger version goes into the same Delta commit, as an application transaction (a ``txn``
action: app id ``ledger:<table uuid>``, version = the ledger version) and as commit metadata.
So a publish that crashed after its commit is recognised by the next one (a no-op), and two
racing publishers conflict in Delta (the loser starts again from the version the winner
recorded). When the changes since the recorded version can no longer be read (the ledger's log
was trimmed or its files vacuumed), the view is republished in full, recorded the same way.

The modules, one idea each: ``plan.py`` (what a publish writes, for any Delta writer),
``rows.py`` (the view's rows read from the ledger), ``delta_types.py`` (the published columns
and their Delta types), ``target.py`` (the Delta table published to: its recorded version and
the checks before writing), ``delta_rs.py`` (writing with deltalake). Spark writes the same plan
with delta-spark (``ledger/engines/spark/publish.py``); ``views.publish`` is the public front.
"""
