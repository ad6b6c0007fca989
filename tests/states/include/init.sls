include:
  - .sub
  - include.other

extend:
  in_sub:
    test:
      - comment: extended
      - require:
        - test: main
main:
  test.succeed_without_changes
