dep_a:
  test.succeed_with_changes
dep_b:
  test.nop
