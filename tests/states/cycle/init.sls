a:
  test.nop:
    - require:
      - test: b
b:
  test.nop:
    - require:
      - test: a
