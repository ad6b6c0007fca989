ok:
  test.succeed_without_changes
changed:
  test.succeed_with_changes:
    - comment: made a change
failed:
  test.fail_without_changes
notified:
  test.show_notification:
    - text: hello from {{ sls }}
