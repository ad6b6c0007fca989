web_c:
  test.nop
