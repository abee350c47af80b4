"""Guard state between hook processes: one SQLite row per session, one short transaction per call.

A harness starts a fresh hook process for every tool call, often several at once, so the
guard's state lives in SQLite: WAL mode (readers never wait for the writer), a busy timeout
(writers queue instead of failing), ``BEGIN IMMEDIATE`` (the read-modify-write of a session row
is one transaction, so parallel processes lose no count). A row holds the guard's own
``Guard.snapshot()`` of a guard that holds just that session, plus the counters ``status``
shows. Idle sessions expire after a TTL and the number of rows is capped, so the file stays
bounded; the ``doom_loop_detected`` events go to ``events.jsonl`` next to it, rotated at 1 MB.
"""

from __future__ import annotations

import os
import time

try:  # the C module: the sqlite3 package around it adds only datetime adapters (and datetime)
    import _sqlite3 as sqlite3
except ImportError:  # pragma: no cover - an interpreter that has only the package
    import sqlite3  # type: ignore[no-redef]

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["DB_NAME", "EVENTS_NAME", "SCHEMA_VERSION", "Store", "state_dir"]

DB_NAME = "hooks.sqlite3"
EVENTS_NAME = "events.jsonl"
SCHEMA_VERSION = 1
MAX_EVENTS_BYTES = 1 << 20
WAL_LIMIT = 4 << 20

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    harness  TEXT NOT NULL,
    session  TEXT NOT NULL,
    snapshot BLOB NOT NULL,
    calls    INTEGER NOT NULL,
    warned   INTEGER NOT NULL,
    blocked  INTEGER NOT NULL,
    records  INTEGER NOT NULL,
    created  REAL NOT NULL,
    updated  REAL NOT NULL,
    pending  TEXT,
    last     TEXT,
    PRIMARY KEY (harness, session)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_updated ON sessions (updated);
"""


def state_dir(override: str | None = None) -> str:
    """``--state``, else ``$LOOPCORE_STATE_DIR``, else ``$XDG_STATE_HOME/loopcore``, else ``~/.local/state/loopcore``."""
    if override:
        return os.path.abspath(os.path.expanduser(override))
    env = os.environ.get("LOOPCORE_STATE_DIR")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "loopcore")
    return os.path.join(os.path.expanduser("~"), ".local", "state", "loopcore")


class Store:
    """The hooks' SQLite file in *directory*; ``busy`` is how long a writer waits for the lock."""

    def __init__(
        self,
        directory: str,
        *,
        busy: float = 2.0,
        ttl: float = 6 * 3600.0,
        max_sessions: int = 1000,
    ):
        self.directory = directory
        self.path = os.path.join(directory, DB_NAME)
        self.events_path = os.path.join(directory, EVENTS_NAME)
        self.busy = busy
        self.ttl = ttl
        self.max_sessions = max_sessions
        self.con: sqlite3.Connection | None = None

    def connect(self, create: bool = True) -> sqlite3.Connection:
        """Open (and when *create*, make) the database; raises sqlite3.Error / OSError."""
        if create:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
        elif not os.path.exists(self.path):
            raise FileNotFoundError(self.path)
        con = sqlite3.connect(
            self.path, timeout=self.busy, isolation_level=None, check_same_thread=False
        )
        try:
            con.execute(f"PRAGMA busy_timeout = {int(self.busy * 1000)}")
            version = con.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION and create:
                con.execute(
                    "PRAGMA journal_mode = WAL"
                )  # persistent: set once, when the file is made
                con.execute("BEGIN IMMEDIATE")
                try:
                    if con.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                        con.execute("DROP TABLE IF EXISTS sessions")  # an older layout: start over
                        for statement in _SCHEMA.split(";"):
                            if statement.strip():
                                con.execute(statement)
                        con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
            con.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints, never corrupt
            con.execute(
                f"PRAGMA journal_size_limit = {WAL_LIMIT}"
            )  # the WAL shrinks back after a checkpoint
        except BaseException:
            con.close()
            raise
        self.con = con
        return con

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None

    # -- one call -------------------------------------------------------------------------

    def open(self) -> None:
        """Connect and take the write lock, within ``busy`` seconds in all. SQLite answers
        "database is locked" without waiting in a few cases (several processes creating the file
        or switching it to WAL at once, a WAL recovery under way), so those are retried here
        with a short back-off; any other error, or the time running out, is raised."""
        end = time.monotonic() + self.busy
        delay = 0.002
        while True:
            try:
                self.connect()
                self.begin()
                return
            except sqlite3.OperationalError as exc:
                self.close()
                text = str(exc)
                if ("locked" not in text and "busy" not in text) or time.monotonic() + delay > end:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def begin(self) -> None:
        """Take the write lock (waits up to ``busy`` seconds; sqlite3.OperationalError after)."""
        assert self.con is not None
        self.con.execute("BEGIN IMMEDIATE")

    def load(self, harness: str, session: str) -> tuple[bytes, str | None, float] | None:
        """(snapshot, pending, created) of a session, or None when it has no row."""
        assert self.con is not None
        row = self.con.execute(
            "SELECT snapshot, pending, created FROM sessions WHERE harness = ? AND session = ?",
            (harness, session),
        ).fetchone()
        return None if row is None else (bytes(row[0]), row[1], row[2])

    def save(
        self,
        harness: str,
        session: str,
        snapshot: bytes,
        counts: dict[str, int],
        pending: str | None,
        last: str | None,
        created: float | None,
    ) -> None:
        """Write a session's row (inside the transaction begin() opened); new sessions expire old ones."""
        assert self.con is not None
        now = time.time()
        self.con.execute(
            "INSERT OR REPLACE INTO sessions (harness, session, snapshot, calls, warned, blocked, records, created, "
            "updated, pending, last) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "COALESCE(?, (SELECT last FROM sessions WHERE harness = ? AND session = ?)))",
            (
                harness,
                session,
                snapshot,
                counts.get("checks", 0),
                counts.get("warns", 0),
                counts.get("blocks", 0),
                counts.get("records", 0),
                now if created is None else created,
                now,
                pending,
                last,
                harness,
                session,
            ),
        )
        if created is None:
            self.expire(now)

    def commit(self) -> None:
        assert self.con is not None
        if self.con.in_transaction:
            self.con.execute("COMMIT")

    def drop(self, harness: str, session: str) -> None:
        assert self.con is not None
        self.con.execute(
            "DELETE FROM sessions WHERE harness = ? AND session = ?", (harness, session)
        )

    def expire(self, now: float | None = None) -> int:
        """Delete sessions idle longer than the TTL, then the oldest beyond max_sessions; returns how many."""
        assert self.con is not None
        now = time.time() if now is None else now
        n = self.con.execute("DELETE FROM sessions WHERE updated < ?", (now - self.ttl,)).rowcount
        n += self.con.execute(
            "DELETE FROM sessions WHERE (harness, session) IN (SELECT harness, session FROM sessions "
            "ORDER BY updated DESC LIMIT -1 OFFSET ?)",
            (self.max_sessions,),
        ).rowcount
        return n

    # -- reading --------------------------------------------------------------------------

    def sessions(self) -> list[dict[str, Any]]:
        """Every tracked session, most recently active first."""
        assert self.con is not None
        rows = self.con.execute(
            "SELECT harness, session, calls, warned, blocked, records, created, updated, last "
            "FROM sessions ORDER BY updated DESC"
        ).fetchall()
        keys = (
            "harness",
            "session",
            "calls",
            "warned",
            "blocked",
            "records",
            "created",
            "updated",
            "last",
        )
        return [dict(zip(keys, r)) for r in rows]

    # -- damage ---------------------------------------------------------------------------

    def quarantine(self) -> str:
        """Move a corrupt database aside (one copy kept) so the next call starts a fresh one."""
        self.close()
        dest = self.path + ".corrupt"
        for suffix in ("", "-wal", "-shm"):
            src = self.path + suffix
            if os.path.exists(src):
                os.replace(src, dest + suffix)
        return dest

    def log_events(self, lines: list[bytes]) -> None:
        """Append JSON lines to events.jsonl (one write; rotated to events.jsonl.1 past 1 MB)."""
        try:
            if os.path.getsize(self.events_path) > MAX_EVENTS_BYTES:
                os.replace(self.events_path, self.events_path + ".1")
        except OSError:
            pass
        fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, b"".join(line + b"\n" for line in lines))
        finally:
            os.close(fd)
