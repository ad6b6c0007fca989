shared_state:
  test.succeed_without_changes:
    - name: shared rendered in {{ saltenv }}
