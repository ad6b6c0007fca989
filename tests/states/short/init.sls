short_form: test.nop
dotted:
  test.succeed_without_changes: []
listed:
  test:
    - nop
