"""The cache's databases: the journal they use depends on the file system they live on."""

from __future__ import annotations

from pathlib import Path

from orchestrator.cache.db import file_system_type, journal_mode

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
