"""Seals on stored files: a file whose bytes were hashed as they were written need not be
hashed again while it is unchanged (docs/releases.md, "Sealed media files").

A seal is an extended attribute of the file holding the sha256 its writer took of its bytes,
its size and its modification time. Sealing first sets the modification time back by two
seconds (to a whole second), so that any later write, which sets it to the present, breaks the
seal whatever the file system's timestamp granularity. A file replaced by another (a new
inode) has no seal, or the seal of other bytes. A seal proves nothing against a change that
restores the size and the modification time (a disk's own damage, ``touch -d`` after an edit):
a release's publishing hashes every byte, seal or none. Where the file system keeps no
extended attributes, nothing is sealed and every reader hashes.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

SEAL_ATTRIBUTE = "user.arbiter.sealed"
_BACKDATE_NS = 2_000_000_000
_SECOND_NS = 1_000_000_000


def _value(sha256: str, held: os.stat_result) -> bytes:
    return f"sha256={sha256} size={held.st_size} mtime_ns={held.st_mtime_ns}".encode()


def seal(path: Path, sha256: str) -> bool:
    """Seals the regular file at ``path`` as holding the bytes whose sha256 is ``sha256``
    (the caller hashed exactly those bytes as it wrote them); False where it cannot be sealed
    (no extended attributes, not a regular file): readers then hash it."""
    try:
        held = os.stat(path, follow_symlinks=False)
        if not stat.S_ISREG(held.st_mode):
            return False
        backdated = (time.time_ns() - _BACKDATE_NS) // _SECOND_NS * _SECOND_NS
        mtime_ns = min(held.st_mtime_ns, backdated)
        os.utime(path, ns=(held.st_atime_ns, mtime_ns), follow_symlinks=False)
        held = os.stat(path, follow_symlinks=False)
        if held.st_mtime_ns > backdated:  # the file system did not keep the time it was given
            return False
        os.setxattr(path, SEAL_ATTRIBUTE, _value(sha256, held), follow_symlinks=False)
    except OSError:
        return False
    return True


def is_sealed(path: Path, sha256: str) -> bool:
    """Whether the file at ``path`` (never a link followed) carries a seal for ``sha256``
    that its size and modification time still match."""
    try:
        value = os.getxattr(path, SEAL_ATTRIBUTE, follow_symlinks=False)
        held = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(held.st_mode) and value == _value(sha256, held)
