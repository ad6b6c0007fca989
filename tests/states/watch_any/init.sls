changed:
  test.succeed_with_changes
same:
  test.succeed_without_changes
w:
  cmd.wait:
    - name: echo watch_any
    - watch_any:
      - test: same
      - test: changed
