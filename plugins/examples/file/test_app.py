"""Unit tests of the `file` example: `python3 -m unittest` in this directory."""

import hashlib
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".maid"))

import app  # noqa: E402


class FileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "motd")
        with open(self.path, "w") as f:
            f.write("hello\n")

    def tearDown(self):
        self.dir.cleanup()

    def test_exists(self):
        self.assertTrue(app.file_exists(self.path))
        self.assertFalse(app.file_exists(self.dir.name))
        self.assertTrue(app.directory_exists(self.dir.name))

    def test_hash_and_read(self):
        self.assertEqual(app.get_hash(self.path), hashlib.sha256(b"hello\n").hexdigest())
        self.assertEqual(app.get_hash(self.path, form="md5"), hashlib.md5(b"hello\n").hexdigest())
        self.assertEqual(app.read(self.path), "hello\n")

    def test_missing_files_raise(self):
        with self.assertRaises(FileNotFoundError):
            app.read(os.path.join(self.dir.name, "nope"))


if __name__ == "__main__":
    unittest.main()
