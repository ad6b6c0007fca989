first:
  test.succeed_without_changes:
    - require:
      - test: second
second:
  test.succeed_with_changes
third:
  test.nop:
    - require:
      - first
      - id: second
