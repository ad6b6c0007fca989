in_sub:
  test.succeed_without_changes:
    - comment: original
