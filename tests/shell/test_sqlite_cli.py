"""`sqlite3`, the SQLite shell, in the guest (guest/declaw_shell/sqlitecli.py): what agents type,
with what Debian's sqlite3 3.40 prints for it (each expectation recorded from it)."""

from __future__ import annotations

from typing import Iterator

import pytest

from declaw_wasm import Sandbox

pytestmark = pytest.mark.guest

SETUP = ("sqlite3 d.db \"create table t(id integer primary key, name text, score real, note); "
         "insert into t values (1,'alice',9.5,NULL),(2,'bob, jr',7,'q'),(3,'chloé',NULL,'n'); "
         "create table u(a, b); create index iu on u(a)\"")

CASES = [
    ("sqlite3 d.db 'select * from t'", "1|alice|9.5|\n2|bob, jr|7.0|q\n3|chloé||n\n", 0),
    ("sqlite3 -header -csv d.db 'select id, name from t'", "id,name\n1,alice\n2,\"bob, jr\"\n3,\"chloé\"\n", 0),
    ("sqlite3 -json d.db 'select id, score from t where id < 3'",
     "[{\"id\":1,\"score\":9.5},\n{\"id\":2,\"score\":7.0}]\n", 0),
    ("sqlite3 d.db .tables", "t  u\n", 0),
    ("sqlite3 d.db '.schema u'", "CREATE TABLE u(a, b);\nCREATE INDEX iu on u(a);\n", 0),
    ("sqlite3 -header -column d.db 'select id, name from t where id < 3'",
     "id  name   \n--  -------\n1   alice  \n2   bob, jr\n", 0),
    ("sqlite3 -box d.db 'select 1 as n, 2.5e-7 as small'",
     "┌───┬─────────┐\n│ n │  small  │\n├───┼─────────┤\n│ 1 │ 2.5e-07 │\n└───┴─────────┘\n", 0),
    ("sqlite3 -markdown d.db 'select id, name from t where id = 1'",
     "| id | name  |\n|----|-------|\n| 1  | alice |\n", 0),
    ("sqlite3 -line d.db 'select id, name from t where id = 1'", "   id = 1\n name = alice\n", 0),
    ("sqlite3 d.db 'select 0.1+0.2, 1e20, 1.0/3, 123456789012345678'",
     "0.3|1.0e+20|0.333333333333333|123456789012345678\n", 0),
    ("sqlite3 d.db 'select count(*) from t; select max(score) from t'", "3\n9.5\n", 0),
    ("printf '.mode csv\\n.headers on\\nselect id,\\n  name from t where id = 2;\\n' | sqlite3 d.db",
     "id,name\n2,\"bob, jr\"\n", 0),
    ("printf 'a,b\\n1,x\\n2,\"y,z\"\\n' > in.csv && sqlite3 d.db '.import --csv in.csv imp' 'select * from imp'",
     "1|x\n2|y,z\n", 0),
    ("sqlite3 d.db '.dump u'", "PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\nCREATE TABLE u(a, b);\nCOMMIT;\n", 0),
    ("sqlite3 d.db '.output out.txt' 'select name from t where id = 1' && cat out.txt", "alice\n", 0),
    ("sqlite3 -version | cut -c1-2", "3.\n", 0),
]
ERRORS = [
    ("sqlite3 d.db 'select * from nope' 'select 1'", "", "Error: in prepare, no such table: nope\n", 1),
    ("printf 'select 1;\\nselect * from nope;\\nselect 2;\\n' | sqlite3 d.db", "1\n2\n",
     "Parse error near line 2: no such table: nope\n", 1),
    ("sqlite3 d.db 'insert into t(id) values (1)'", "",
     "Error: stepping, UNIQUE constraint failed: t.id (19)\n", 19),
    ("sqlite3 d.db .bogus", "",
     "Error: unknown command or invalid arguments:  \"bogus\". Enter \".help\" for help\n", 1),
    ("sqlite3 nosuch/x.db 'select 1'", "",
     "Error: unable to open database \"nosuch/x.db\": unable to open database file\n", 1),
]


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=600)
    assert sandbox.commands.run(SETUP, cwd="/home/user").exit_code == 0
    yield sandbox
    sandbox.kill()


def test_queries_modes_and_dot_commands_print_what_sqlite3_prints(box: Sandbox) -> None:
    wrong = []
    for line, stdout, status in CASES:
        run = box.commands.run(line, cwd="/home/user")
        if (run.stdout, run.exit_code) != (stdout, status):
            wrong.append((line, run.stdout, run.stderr, run.exit_code))
    assert wrong == []


def test_errors_are_said_as_sqlite3_says_them(box: Sandbox) -> None:
    wrong = []
    for line, stdout, stderr, status in ERRORS:
        run = box.commands.run(line, cwd="/home/user")
        if (run.stdout, run.stderr, run.exit_code) != (stdout, stderr, status):
            wrong.append((line, run.stdout, run.stderr, run.exit_code))
    assert wrong == []
