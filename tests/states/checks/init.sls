skipped_unless:
  cmd.run:
    - name: echo unless
    - unless: 'true'
runs_unless:
  cmd.run:
    - name: echo runs
    - unless: 'false'
skipped_onlyif:
  cmd.run:
    - name: echo onlyif
    - onlyif: 'false'
runs_onlyif:
  cmd.run:
    - name: echo onlyif ran
    - onlyif:
      - 'true'
      - 'test 1 -eq 1'
created:
  cmd.run:
    - name: echo created
    - creates: '@ROOT@'
notcreated:
  cmd.run:
    - name: echo not created
    - creates:
      - '@ROOT@'
      - '@ROOT@/nonexistent/path'
test_state_unless:
  test.succeed_with_changes:
    - unless: 'true'
fails:
  cmd.run:
    - name: 'echo to stderr >&2; exit 3'
