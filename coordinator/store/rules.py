"""The store's rules, each spelled once, as SQLAlchemy expressions over a proposal.

A proposal's values are SQL expressions: bound parameters when one proposal runs on its own
(``BOUND``, ``BOUND_MARK``), or the columns of the arrays a grouped statement unnests. The one-row
statements, the grouped ones (``dialect.py``) and the classification of a refused proposal
(``commits.py``) are all built from the builders below, so what makes a proposal acceptable, and what
a backfill mark writes, cannot disagree between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from sqlalchemy import BigInteger, ColumnElement, Update, and_, bindparam, case, exists, or_, select, update

from coordinator.store.rows import CommitRow, now_ms
from coordinator.store.schema import commits, owned_tables

# The columns of a newly ratified commit row (a new commit is unbackfilled: ``backfilled_at`` stays NULL).
RATIFIED = tuple(c.name for c in commits.c if c.name != "backfilled_at")

NOW: Any = bindparam("p_now")


class ProposalTerms(NamedTuple):
    """A proposed commit as SQL expressions."""

    table_id: Any
    version: Any
    commit_timestamp: Any
    idempotency_key: Any
    max_unbackfilled: Any

    @classmethod
    def of(cls, columns: Mapping[str, Any]) -> ProposalTerms:
        return cls(*(columns[f] for f in cls._fields))


# One proposal's values as bound parameters: ``c_<column>`` for the commit row's columns (``ratify_params``).
BOUND_COLUMNS: dict[str, Any] = {n: bindparam("c_" + n, type_=commits.c[n].type) for n in RATIFIED}
BOUND = ProposalTerms.of({**BOUND_COLUMNS, "max_unbackfilled": bindparam("p_max_unbackfilled", type_=BigInteger())})
# The backfill mark a ratification carries (``carried``): -1 when it carries none.
BOUND_CARRIED: Any = bindparam("p_carried", type_=BigInteger())


def acceptance(p: ProposalTerms) -> dict[str, ColumnElement[bool]]:
    """THE commit-acceptance rule: the table row accepts proposal ``p`` when every clause holds. In the order a
    refusal is reported (``commits.Commits._classify``): the table accepts commits; ``p`` is the version right
    after the latest; the backlog of unbackfilled commits is below the cap; its inCommitTimestamp increases."""
    t = owned_tables.c
    return {
        "accepting": t.accepting.is_(True),
        "version": t.latest_version + 1 == p.version,
        "backlog": (t.latest_version - t.latest_backfilled_version) < p.max_unbackfilled,
        "timestamp": or_(t.last_commit_timestamp.is_(None), t.last_commit_timestamp < p.commit_timestamp),
    }


def key_unused(p: ProposalTerms) -> ColumnElement[bool]:
    """The guard of grouped ratifications: ``p``'s idempotency key is not used yet on its table (a used key
    would fail the INSERT, and with it the whole group's statement or transaction)."""
    c = commits.c
    return ~exists().where(and_(c.table_id == p.table_id, c.idempotency_key == p.idempotency_key))


def _taken(column: Any, taken: Any) -> list[ColumnElement[bool]]:
    return [] if taken is None else [column.in_(select(taken.c.table_id))]


def ratification(p: ProposalTerms, *, releases: bool = False, guarded: bool = False, taken: Any = None,
                 carried: Any = None) -> Update:
    """The conditional UPDATE that ratifies ``p``: it matches the table row only when ``acceptance`` holds
    (and with ``guarded`` the key is unused; with ``taken``, a CTE of locked table ids, the row is among
    them). A release (``releases``) also stops the table accepting commits. With ``carried`` (an expression:
    a version, or -1), it also records that backfill mark on the table row (``carried_values``); the commit
    rows' half of the mark is ``mark_rows`` on the rows the ratification won."""
    t = owned_tables.c
    values: dict[str, Any] = dict(latest_version=p.version, last_commit_timestamp=p.commit_timestamp,
                                  last_commit_at=NOW, updated_at=NOW)
    if carried is not None:
        values.update(carried_values(carried))
    if releases:
        values.update(accepting=False, status="RELEASED", status_reason=bindparam("p_status_reason"))
    cond = [t.table_id == p.table_id, *_taken(t.table_id, taken), *acceptance(p).values()]
    if guarded:
        cond.append(key_unused(p))
    return update(owned_tables).where(and_(*cond)).values(**values)


def ratify_params(row: CommitRow, max_unbackfilled: int, now: int | None = None, carried: int = -1) -> dict[str, Any]:
    """The bound parameters of ``BOUND``'s statements for ``row`` (``carried``: the mark it carries, -1 none)."""
    params: dict[str, Any] = {"c_" + n: getattr(row, n) for n in RATIFIED}
    params.update(p_max_unbackfilled=max_unbackfilled, p_now=now_ms() if now is None else now, p_carried=carried,
                  p_status_reason=f"ownership given up at version {row.version}")
    return params


def commit_values(row: CommitRow) -> dict[str, Any]:
    return {f: getattr(row, f) for f in CommitRow.__dataclass_fields__}


# -- backfill marks ---------------------------------------------------------------------------------------

class Mark(NamedTuple):
    """A backfill mark (every version of the table up to ``up_to`` is published) as SQL expressions."""

    table_id: Any
    up_to: Any


BOUND_MARK = Mark(bindparam("p_table_id"), bindparam("p_up_to"))


def mark_params(table_id: str, up_to: int, now: int) -> dict[str, Any]:
    return {"p_table_id": table_id, "p_up_to": up_to, "p_now": now}


def mark_rows(m: Mark, taken: Any = None) -> Update:
    """Mark the table's unbackfilled commit rows up to ``m.up_to`` backfilled, and let go of their bytes: a
    published commit is read from ``<v>.json`` and its staged file, never from its row."""
    c = commits.c
    return (update(commits)
            .where(and_(c.table_id == m.table_id, *_taken(c.table_id, taken), c.version <= m.up_to,
                        c.backfilled_at.is_(None)))
            .values(backfilled_at=NOW, body=None))


def _advanced(up_to: Any) -> dict[str, Any]:
    """What a mark through ``up_to`` sets on a table row it advances."""
    return dict(latest_backfilled_version=up_to, backfill_error=None, backfill_error_at=None)


def carried_values(up_to: Any) -> dict[str, Any]:
    """A mark carried by a ratification (decision 62): the table row's columns advanced as ``advance_table``
    advances them when ``up_to`` is ahead of the row's mark, else left as they are (the ratification's own
    clauses already hold the row to ``latest_version >= up_to``: ``up_to`` is never past the row's latest)."""
    t = owned_tables.c
    ahead = up_to > t.latest_backfilled_version
    return {k: case((ahead, v), else_=t[k]) for k, v in _advanced(up_to).items()}


def advance_table(m: Mark, taken: Any = None) -> Update:
    """Advance the table's latest backfilled version to ``m.up_to`` (never back, never past the latest) and
    clear its recorded backfill error."""
    t = owned_tables.c
    return (update(owned_tables)
            .where(and_(t.table_id == m.table_id, *_taken(t.table_id, taken), t.latest_backfilled_version < m.up_to,
                        t.latest_version >= m.up_to))
            .values(**_advanced(m.up_to), updated_at=NOW))
