config:
  test.succeed_with_changes
unchanged:
  test.succeed_without_changes
restart:
  cmd.run:
    - name: echo restarted
    - watch:
      - test: config
untouched:
  cmd.wait:
    - name: echo never
    - watch:
      - test: unchanged
fired:
  cmd.wait:
    - name: echo fired
    - watch:
      - test: config
testwatch:
  test.succeed_without_changes:
    - watch:
      - test: config
