web_state:
  test.succeed_without_changes:
    - name: web rendered in {{ saltenv }}
