good:
  test.succeed_without_changes
bad:
  test.fail_without_changes
needs_any:
  test.nop:
    - require_any:
      - test: good
      - test: bad
needs_all:
  test.nop:
    - require:
      - test: good
      - test: bad
