changed:
  test.succeed_with_changes
unchanged:
  test.succeed_without_changes
listener:
  cmd.run:
    - name: echo listening
    - listen:
      - test: changed
quiet_listener:
  cmd.run:
    - name: echo quiet
    - listen:
      - test: unchanged
in_form:
  test.succeed_with_changes:
    - listen_in:
      - cmd: quiet_listener
bad_listen:
  test.nop:
    - listen:
      - test: nowhere
