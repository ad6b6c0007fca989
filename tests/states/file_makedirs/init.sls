# file.managed and the directory it goes in: made with makedirs (and
# dir_mode, or mode with execute bits), or missing.
deep:
  file.managed:
    - name: @ROOT@/made/a/b/c.txt
    - contents: deep
    - makedirs: True

deep_modes:
  file.managed:
    - name: @ROOT@/made/m/n/o.txt
    - contents: deep
    - makedirs: True
    - dir_mode: '0700'

deep_from_mode:
  file.managed:
    - name: @ROOT@/made/p/q.txt
    - contents: deep
    - makedirs: True
    - mode: '0640'

no_parent:
  file.managed:
    - name: @ROOT@/absent_dir/x.txt
    - contents: x

no_parent_source:
  file.managed:
    - name: @ROOT@/absent_dir/y.txt
    - source: salt://file_makedirs/init.sls
