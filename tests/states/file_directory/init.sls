# file.directory: made, made with its parents, its mode changed, a
# missing parent, a file in the way (refused, then forced), a link.
top:
  file.directory:
    - name: @ROOT@/dirs

plain:
  file.directory:
    - name: @ROOT@/dirs/plain

nested:
  file.directory:
    - name: @ROOT@/dirs/a/b/c
    - makedirs: True
    - dir_mode: 750

moded:
  file.directory:
    - name: @ROOT@/dirs/plain
    - mode: 700

no_parent:
  file.directory:
    - name: @ROOT@/dirs/missing/child

a_file:
  file.managed:
    - name: @ROOT@/dirs/file
    - contents: x

refused:
  file.directory:
    - name: @ROOT@/dirs/file

slash:
  file.directory:
    - name: @ROOT@/dirs/slash/

relative:
  file.directory:
    - name: dirs/relative

forced_file:
  file.managed:
    - name: @ROOT@/dirs/forced
    - contents: x
    - replace: False

forced:
  file.directory:
    - name: @ROOT@/dirs/forced
    - force: True
    - require:
      - file: forced_file
