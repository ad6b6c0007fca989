"""The `@NAME@` module: a maid plugin written in Python.

Every public function here is a Salt function `@NAME@.<function>`; its
parameters are the arguments a job may pass, positional or by keyword, and
the first line of its docstring is its documentation. What it returns is
sent back as JSON. See docs/plugin-guide.md in the maid repository.
"""

import logging

import maid

log = logging.getLogger(__name__)


def greet(name, shout=False):
    """Greet someone: `@NAME@.greet world shout=true`."""
    if not name:
        raise maid.CommandExecutionError("name must not be empty")
    log.info("greeting %s", name)
    greeting = f"hello, {name}"
    return greeting.upper() if shout else greeting
