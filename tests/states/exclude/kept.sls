kept_a:
  test.nop
kept_b:
  test.nop
