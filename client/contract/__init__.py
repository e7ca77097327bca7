"""The shared contract of delta-commit-owner: what the client and the server must agree on.

Standard library only. The service, the backfiller and the ops jobs import these modules; so does the client.

* :mod:`.errors`: the one error family and its JSON envelope (codes, HTTP statuses, what a caller should do).
* :mod:`.layout`: the Delta log layout (file names, commit folders, location spelling).
* :mod:`.commits`: the wire shape of one ratified commit.
* :mod:`.delta_log`: Delta log rules (property generations, owner references, action parsing).
* :mod:`.delta_schema`: Delta's schema serialization format, checked.
"""
