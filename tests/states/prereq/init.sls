will_change:
  test.succeed_with_changes
before_change:
  test.succeed_without_changes:
    - prereq:
      - test: will_change
no_change:
  test.succeed_without_changes
not_before:
  test.succeed_without_changes:
    - prereq:
      - test: no_change
