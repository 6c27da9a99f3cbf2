# The row-by-row SQLite program of the seed "Building Incremental and
# Idempotent Pipelines" (seeds/incremental-idempotent-pipelines.txt, the lab's
# setup), run by idem-bench's jsonl case against `idem run` on the same JSON
# Lines batch. database() and apply() below are the seed's code, copied
# verbatim; only the loader after them is idem-bench's.
#
#   python3 seed_apply.py apply  CHANGES.jsonl DB.sqlite   # time this
#   python3 seed_apply.py digest DB.sqlite                 # compare this
#
# The seed's database() opens ":memory:"; the loader points that name at an
# on-disk file instead (a fresh one per repetition), so that SQLite, like
# idem, writes and commits a database file.

import sqlite3, hashlib, json

def database():
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript("""
      CREATE TABLE state (id TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL,
                          value INTEGER, deleted INTEGER NOT NULL);
      CREATE TABLE batches (id TEXT PRIMARY KEY NOT NULL, digest TEXT NOT NULL);
      CREATE TABLE progress (id INTEGER PRIMARY KEY, cursor INTEGER, epoch INTEGER);
      INSERT INTO progress VALUES (1, 0, 1);
    """)
    return db

def apply(db, batch_id, start, end, rows, epoch, fail=False):
    if not batch_id or type(start) is not int or type(end) is not int or end <= start:
        raise ValueError("invalid batch bounds")
    seen = set()
    for key, version, value, deleted in rows:
        if not isinstance(key, str) or not key or type(version) is not int or version < 1:
            raise ValueError("invalid identity or version")
        if type(deleted) is not bool or (deleted and value is not None) or (not deleted and type(value) is not int):
            raise ValueError("invalid payload")
        if (key, version) in seen:
            raise ValueError("duplicate key-version in staged batch")
        seen.add((key, version))
    payload = ["transform-v1", start, end, sorted(rows, key=lambda r: (r[0], r[1]))]
    digest = hashlib.sha256(json.dumps(payload, separators=(",", ":")).encode()).hexdigest()
    db.execute("BEGIN IMMEDIATE")
    try:
        cursor, current_epoch = db.execute("SELECT cursor, epoch FROM progress WHERE id=1").fetchone()
        if epoch != current_epoch:
            raise ValueError("stale worker")
        receipt = db.execute("SELECT digest FROM batches WHERE id=?", (batch_id,)).fetchone()
        if receipt:
            if receipt[0] != digest:
                raise ValueError("batch identity conflict")
            db.commit()
            return "already committed"
        if start != cursor:
            raise ValueError("unexpected source cursor")
        for key, version, value, deleted in sorted(rows, key=lambda r: (r[0], r[1])):
            old = db.execute("SELECT version,value,deleted FROM state WHERE id=?", (key,)).fetchone()
            if old and version == old[0] and (value, int(deleted)) != old[1:]:
                raise ValueError("equal-version conflict")
            if old and version <= old[0]:
                continue
            db.execute("INSERT INTO state VALUES (?,?,?,?) ON CONFLICT(id) DO UPDATE SET version=excluded.version,value=excluded.value,deleted=excluded.deleted", (key,version,value,int(deleted)))
        if fail:
            raise RuntimeError("injected before ledger and cursor")
        db.execute("INSERT INTO batches VALUES (?,?)", (batch_id,digest))
        db.execute("UPDATE progress SET cursor=? WHERE id=1", (end,))
        db.commit()
        return "committed"
    except Exception:
        if db.in_transaction:
            db.rollback()
        raise


# --- idem-bench's loader (not the seed's) ---

import sys


def load(path):
    """Reads one JSON object per line into the seed's (key, version, value,
    deleted) rows: key = entity_id, version = source_version, value = value
    (null for a delete), deleted = operation == "delete"."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            o = json.loads(line)
            rows.append((o["entity_id"], o["source_version"], o["value"], o["operation"] == "delete"))
    return rows


def on_disk(path):
    """Makes database()'s sqlite3.connect(":memory:") open path instead."""
    connect = sqlite3.connect

    def connect_file(name, *args, **kwargs):
        return connect(path if name == ":memory:" else name, *args, **kwargs)

    sqlite3.connect = connect_file


def digest(path):
    """sha256 of the state rows in id order, one "id,version,value,deleted"
    line each (value None for a delete), and their count: idem-bench compares
    it with the same text of idem's target."""
    db = sqlite3.connect(path)
    h = hashlib.sha256()
    n = 0
    for key, version, value, deleted in db.execute("SELECT id, version, value, deleted FROM state ORDER BY id"):
        h.update(("%s,%d,%s,%d\n" % (key, version, value, deleted)).encode())
        n += 1
    db.close()
    return "%d rows, sha256 %s" % (n, h.hexdigest())


def main(argv):
    if len(argv) == 4 and argv[1] == "apply":
        on_disk(argv[3])
        rows = load(argv[2])
        db = database()
        print(apply(db, "B1", 0, 1, rows, 1), len(rows))
        db.close()
    elif len(argv) == 3 and argv[1] == "digest":
        print(digest(argv[2]))
    else:
        sys.exit("usage: seed_apply.py apply CHANGES.jsonl DB.sqlite | digest DB.sqlite")


if __name__ == "__main__":
    main(sys.argv)
