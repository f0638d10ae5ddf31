"""The SQLite store refuses a file on a network file system (where WAL mode is unsafe), naming the file
system and the Redis store; the mount table is read by the longest mount point that holds the path."""

from __future__ import annotations

import pytest

from swift_rlfactory.env.config import EnvConfigError
from swift_rlfactory.env.environment import Environment
from swift_rlfactory.tools import ToolCache, cache_sqlite
from swift_rlfactory.tools.cache_sqlite import filesystem_of

MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
proc /proc proc rw 0 0
fileserver:/export/home /home nfs4 rw,vers=4.2 0 0
/dev/vdb /home/alice/scratch xfs rw 0 0
//nas/share /mnt/team\\040share cifs rw 0 0
tmpfs /mnt/over tmpfs rw 0 0
alice@host:/data /mnt/over fuse.sshfs rw 0 0
"""


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/home/alice/env/.cache/tools.sqlite", "nfs4"),
        ("/home/alice/scratch/tools.sqlite", "xfs"),  # a local disk mounted inside the NFS home
        ("/home/alice/scratchpad/tools.sqlite", "nfs4"),  # a prefix of the name is not a parent folder
        ("/home", "nfs4"),
        ("/mnt/team share/tools.sqlite", "cifs"),  # \040 is a space in the mount table
        ("/mnt/over/tools.sqlite", "fuse.sshfs"),  # the later of two mounts on one point hides the first
        ("/var/tmp/tools.sqlite", "ext4"),
    ],
)
def test_the_longest_mount_point_holding_the_path_decides(path, kind):
    assert filesystem_of(path, MOUNTS) == kind


def test_no_line_covers_a_path_outside_every_mount():
    assert filesystem_of("/data/x", "srv:/e /home nfs rw 0 0\n\n") is None


def test_an_sqlite_file_on_nfs_is_refused_naming_why_and_the_redis_store(tmp_path, monkeypatch):
    table = tmp_path / "mounts"
    shared = tmp_path / "shared"
    table.write_text(f"/dev/vda / ext4 rw 0 0\nserver:/e {shared} nfs4 rw 0 0\n")
    monkeypatch.setattr(cache_sqlite, "MOUNTS", table)
    with pytest.raises(ValueError, match=r"network file system \(nfs4\).*WAL.*cache\.redis_url"):
        ToolCache(sqlite_path=shared / "tools.sqlite")
    ToolCache(sqlite_path=tmp_path / "local" / "tools.sqlite").close()  # a local disk is fine

    (tmp_path / "tools.py").write_text(
        "from swift_rlfactory.tools import tool\n\n@tool\ndef echo(text: str) -> str:\n"
        '    """Echo."""\n    return text\n'
    )
    env = tmp_path / "env.yaml"
    env.write_text("tools: {python: [tools.py]}\ncache: {tools: ['*'], sqlite_path: shared/c.sqlite}\n")
    with pytest.raises(EnvConfigError, match="cache.sqlite_path: cannot use .*network file system"):
        Environment.load(env)
