# file.touch: made, its times set (an existing file), with its parents,
# a missing directory, a relative path, a directory.
new:
  file.touch:
    - name: @ROOT@/touch/new.txt
    - makedirs: True

times:
  file.touch:
    - name: @ROOT@/touch/times.txt
    - atime: 1000000000
    - mtime: 1000000000
    - makedirs: True

no_dir:
  file.touch:
    - name: @ROOT@/nothere/file.txt

relative:
  file.touch:
    - name: touch/relative.txt

a_dir:
  file.touch:
    - name: @ROOT@/touch
    - require:
      - file: new
