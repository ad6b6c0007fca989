include:
  - .a.b
top_level:
  test.nop
