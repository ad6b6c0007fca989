web_a:
  test.succeed_with_changes
