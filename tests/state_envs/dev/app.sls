include:
  - .lib
  - prod: web
  - base: shared

app_motd:
  file.managed:
    - name: @ROOT@/out/dev_motd
    - source: salt://files/motd
    - makedirs: True

app_base_motd:
  file.managed:
    - name: @ROOT@/out/dev_base_motd
    - source: salt://files/motd?saltenv=base
    - makedirs: True

app_conf:
  file.managed:
    - name: @ROOT@/out/dev_conf
    - source: salt://files/conf.j2
    - template: jinja
    - makedirs: True
    - require:
      - sls: lib
