target:
  test.succeed_with_changes
middle:
  test.succeed_with_changes:
    - prereq:
      - test: target
outer:
  test.succeed_without_changes:
    - prereq:
      - test: middle
