# An include by glob takes every SLS name the file server lists that it
# matches, in sorted order (web.c is web/c/init.sls; web/notes.txt is no
# SLS).
include:
  - include_glob.web.*

here:
  test.succeed_without_changes
