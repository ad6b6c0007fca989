nofun:
  test:
    - comment: no function
twofuns:
  test:
    - nop
    - succeed_without_changes
trailing:
  test.nop:
