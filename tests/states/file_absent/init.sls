# file.absent: a file, a directory with what is in it, a link, and what
# is not there; a relative path and "/".
a_file:
  file.managed:
    - name: @ROOT@/gone/file.txt
    - contents: x
    - makedirs: True

a_dir:
  file.managed:
    - name: @ROOT@/gone/dir/inner/file.txt
    - contents: x
    - makedirs: True

remove_file:
  file.absent:
    - name: @ROOT@/gone/file.txt

remove_dir:
  file.absent:
    - name: @ROOT@/gone/dir

never_there:
  file.absent:
    - name: @ROOT@/gone/never

relative:
  file.absent:
    - name: gone/relative

root:
  file.absent:
    - name: /
