include:
  - prod: nosuch

unknown_state:
  test.nop
