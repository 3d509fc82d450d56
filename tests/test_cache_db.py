"""The cache's databases: the journal they use depends on the file system they live on; one
of another release is replaced, one that is damaged is set aside."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from orchestrator.cache.db import file_system_type, journal_mode, open_db

MOUNTS = """\
/dev/vda1 / ext4 rw,relatime 0 0
server:/export /mnt/cache nfs4 rw,relatime 0 0
//host/share /mnt/smb cifs rw 0 0
sshfs#me@host:/ /mnt/remote fuse.sshfs rw 0 0
/dev/vdb1 /mnt/cache/local ext4 rw 0 0
"""


def test_the_deepest_mount_holding_a_path_names_its_file_system():
    """A path's file system is that of the longest mount point above it."""
    assert file_system_type(Path("/mnt/cache/x"), MOUNTS) == "nfs4"
    assert file_system_type(Path("/mnt/cache/local/x"), MOUNTS) == "ext4"
    assert file_system_type(Path("/mnt/cachex"), MOUNTS) == "ext4"  # not inside /mnt/cache


def test_network_file_systems_get_the_rollback_journal():
    """WAL needs memory shared by every process using the database: not on NFS, SMB or FUSE."""
    assert journal_mode(Path("/mnt/cache/actions.sqlite"), MOUNTS) == "DELETE"
    assert journal_mode(Path("/mnt/smb/actions.sqlite"), MOUNTS) == "DELETE"
    assert journal_mode(Path("/mnt/remote/actions.sqlite"), MOUNTS) == "DELETE"
    assert journal_mode(Path("/mnt/cache/local/actions.sqlite"), MOUNTS) == "WAL"
    assert journal_mode(Path("/home/me/actions.sqlite"), MOUNTS) == "WAL"


SCHEMA = "CREATE TABLE t (x INTEGER);"


def test_a_database_of_another_release_is_replaced_not_kept(tmp_path):
    """Another schema version starts empty and leaves no set-aside copy behind."""
    path = tmp_path / "db.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE old (y)")
    old.execute("PRAGMA user_version = 1")
    old.close()
    db = open_db(path, SCHEMA, 2)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]
    db.close()
    assert sorted(p.name for p in tmp_path.iterdir() if "damaged" in p.name) == []


def test_a_damaged_database_is_set_aside_and_started_again(tmp_path):
    """Bytes that are not a database are moved aside for a post-mortem; a new one opens."""
    path = tmp_path / "db.sqlite"
    path.write_bytes(b"not a database at all" * 100)
    db = open_db(path, SCHEMA, 2)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    db.close()
    assert [p.name.startswith("db.sqlite.damaged-") for p in tmp_path.iterdir()].count(True) == 1
