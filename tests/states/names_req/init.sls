pkgs:
  test.succeed_with_changes:
    - names:
      - one
      - two
after:
  test.nop:
    - require:
      - test: two
