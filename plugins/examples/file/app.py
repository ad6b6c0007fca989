"""Part of Salt's `file` execution module, as a maid plugin in Python.

Files are read through WASI: the plugin sees only the directories granted
to it (`dirs` in the agent's `[plugins.file]`), at the same paths as on the
host; everything else does not exist for it. Like Salt's, these functions
let an `OSError` propagate, so a missing file comes back as the traceback.
"""

import hashlib
import logging
import os

log = logging.getLogger(__name__)


def file_exists(path):
    """Return True if `path` exists and is a file."""
    return os.path.isfile(path)


def directory_exists(path):
    """Return True if `path` exists and is a directory."""
    return os.path.isdir(path)


def get_hash(path, form="sha256", chunk_size=65536):
    """Return the hash of a file: `file.get_hash /etc/hosts form=md5`."""
    if form not in hashlib.algorithms_guaranteed:
        raise ValueError(f"Invalid hash type: {form}")
    digest = hashlib.new(form)
    with open(path, "rb") as f:
        while chunk := f.read(chunk_size):
            digest.update(chunk)
    log.debug("hashed %s with %s", path, form)
    return digest.hexdigest()


def read(path):
    """Return the contents of a text file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()
