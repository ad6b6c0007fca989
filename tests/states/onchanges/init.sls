changes:
  test.succeed_with_changes
quiet:
  test.succeed_without_changes
runs:
  cmd.run:
    - name: echo ran
    - onchanges:
      - test: changes
skipped:
  cmd.run:
    - name: echo skipped
    - onchanges:
      - test: quiet
any:
  test.nop:
    - onchanges_any:
      - test: quiet
      - test: changes
