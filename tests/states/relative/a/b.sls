include:
  - ..c
in_b:
  test.nop
