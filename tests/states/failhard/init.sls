first:
  test.succeed_without_changes
stop:
  test.fail_without_changes:
    - failhard: True
never:
  test.succeed_without_changes
