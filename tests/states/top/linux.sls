linux:
  test.nop
