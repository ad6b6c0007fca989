gone_a:
  test.nop
