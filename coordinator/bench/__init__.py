"""`commit-owner bench`: the owner measured beside the physical floor and delta-rs (docs/benchmarks.md).

Modules: ``env`` starts the world (database, storage, the service as a subprocess), ``load`` drives HTTP
writers and readers, ``floor`` does only the unavoidable work of a commit, ``deltars`` commits the same
add actions with delta-rs, ``growth`` fills the database, ``compaction`` scans a table of small files before and after a
compaction pass, ``runner`` runs the scenarios and ``report`` prints the table and draws the chart.
"""
