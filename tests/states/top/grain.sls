by_grain:
  test.nop
