include:
  - qa: lib

badenv_state:
  test.nop
