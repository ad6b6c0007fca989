base:
  test.succeed_without_changes:
    - comment: shared comment
user:
  test.succeed_without_changes:
    - use:
      - test: base
