a:
  test.succeed_without_changes:
    - require_in:
      - test: b
b:
  test.nop
c:
  test.succeed_with_changes:
    - watch_in:
      - cmd: d
    - onchanges_in:
      - test: e
d:
  cmd.wait:
    - name: echo d
e:
  test.nop
f:
  test.fail_without_changes:
    - onfail_in:
      - test: g
g:
  test.succeed_without_changes
