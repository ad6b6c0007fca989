bad:
  test.fail_without_changes
good:
  test.succeed_without_changes
recover:
  test.succeed_with_changes:
    - onfail:
      - test: bad
notneeded:
  test.succeed_with_changes:
    - onfail:
      - test: good
anyfail:
  test.nop:
    - onfail_any:
      - test: good
      - test: bad
allfail:
  test.nop:
    - onfail_all:
      - test: good
      - test: bad
