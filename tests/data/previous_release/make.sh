#!/bin/sh
# Makes the databases of the release before schema migrations (commit 7867917), for
# tests/e2e/test_schema_upgrade_e2e.py, by running that release's code:
#   git archive 7867917 | tar -x -C /tmp/old
#   PYTHONPATH=/tmp/old sh tests/data/previous_release/make.sh OUT_FOLDER [POSTGRES_ADMIN_URL]
# Writes OUT_FOLDER/contreact.db.gz (SQLite: two finished runs) and OUT_FOLDER/postgres.sql.gz
# (the same on PostgreSQL, as pg_dump's INSERT statements, which any client can replay).
set -eu
out=$(cd "$1" && pwd)
admin=${2:-postgresql://postgres@127.0.0.1:5432/test}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python=$(cd "$(dirname "${PYTHON:-.venv/bin/python}")" && pwd)/$(basename "${PYTHON:-.venv/bin/python}")
cd "$work"  # `python -m` puts the working folder first on the path: not a checkout's code

"$python" -m contreact --data-dir "$work/runs" demo --cycles 2 --run-id old-a -q
"$python" -m contreact --data-dir "$work/runs" demo --cycles 2 --run-id old-b -q
sqlite3 "$work/runs/contreact.db" "PRAGMA wal_checkpoint(TRUNCATE); VACUUM;"
gzip -9n < "$work/runs/contreact.db" > "$out/contreact.db.gz"

db=contreact_previous_release
psql "$admin" -q -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
url="postgresql+psycopg://${admin#*://}"
url="${url%/*}/$db"
"$python" -m contreact --db-url "$url" --data-dir "$work/pg" demo --cycles 2 --run-id old-a -q
"$python" -m contreact --db-url "$url" --data-dir "$work/pg" demo --cycles 2 --run-id old-b -q
pg_dump --inserts --no-owner --no-privileges "${admin%/*}/$db" | gzip -9n > "$out/postgres.sql.gz"
psql "$admin" -q -c "DROP DATABASE $db"
