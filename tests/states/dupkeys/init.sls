a:
  test.nop
a:
  test.nop
