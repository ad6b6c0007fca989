web_b:
  test.succeed_without_changes:
    - require:
      - test: web_a
