a:
  test.nop
 b: [
