include:
  - _xenv: lib

xenv_state:
  test.nop
