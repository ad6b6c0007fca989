in_c:
  test.nop
