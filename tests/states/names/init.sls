greetings:
  test.succeed_without_changes:
    - names:
      - hello
      - world
      - bonjour:
        - comment: in French
late:
  test.nop:
    - order: last
early:
  test.nop:
    - order: first
numbered:
  test.nop:
    - order: 5
