tools_env:
  test.succeed_without_changes:
    - name: tools rendered in {{ saltenv }}
