a:
  test.nop:
    - require:
      - test: nowhere
