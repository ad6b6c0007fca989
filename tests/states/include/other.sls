in_other:
  test.nop
