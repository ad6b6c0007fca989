common_motd:
  file.managed:
    - name: @ROOT@/out/base_motd
    - source: salt://files/motd
    - makedirs: True

common_env:
  test.succeed_without_changes:
    - name: common rendered in {{ saltenv }}
