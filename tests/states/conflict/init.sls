include:
  - conflict.other
same:
  test.nop
