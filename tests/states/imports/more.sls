from_include:
  test.nop
