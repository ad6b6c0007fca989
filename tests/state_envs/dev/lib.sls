{% import_yaml "vars.yaml" as vars %}
lib_state:
  test.succeed_without_changes:
    - name: lib of {{ saltenv }} says {{ vars.word }}
