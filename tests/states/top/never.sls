never:
  test.nop
