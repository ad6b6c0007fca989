web_one:
  test.succeed_with_changes
web_two:
  test.succeed_without_changes
after_web:
  test.nop:
    - require:
      - test: web_*
