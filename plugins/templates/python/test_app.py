"""Unit tests for app.py, run on the build machine: `python3 -m unittest`.

They call the functions directly; `maid plugin test` runs them inside the
built component, with the host and its grants.
"""

import os
import sys
import unittest

# `maid plugin new` and `maid plugin build` write the `maid` helper here.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".maid"))

import app  # noqa: E402
import maid  # noqa: E402


class GreetTest(unittest.TestCase):
    def test_greets(self):
        self.assertEqual(app.greet("world"), "hello, world")
        self.assertEqual(app.greet("world", shout=True), "HELLO, WORLD")

    def test_an_empty_name_fails(self):
        with self.assertRaises(maid.CommandExecutionError):
            app.greet("")


if __name__ == "__main__":
    unittest.main()
