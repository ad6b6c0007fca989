same:
  test.succeed_without_changes
