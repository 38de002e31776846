"""Which storage engine a database target names: a SQLite file (the default) or a PostgreSQL URL.

Its own module so that `db` (SQLite, the base class) and `pg` (PostgreSQL, a subclass) need not
import each other: the choice is made here, above both.
"""

from __future__ import annotations

import time
from pathlib import Path

from memframe.service.db import Clock, Database, is_postgres_url


def open_database(target: str | Path, *, clock: Clock = time.time) -> Database:
    """The database `target` names: `postgresql://…` opens PostgreSQL through a connection pool
    (psycopg is imported only then); a path or `sqlite:///path` opens that SQLite file."""
    if is_postgres_url(target):
        from memframe.service.pg import PostgresDatabase

        return PostgresDatabase(str(target), clock=clock)
    return Database(target, clock=clock)
