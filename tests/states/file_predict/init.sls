# test=True on files that are already there (this tree's own data, under
# the file root): the diffs, mode changes and removals Salt predicts,
# then makes, then finds nothing left to do (or, for touch, does again).
contents_diff:
  file.managed:
    - name: @ROOT@/srv/file_predict/data/conf.txt
    - contents: |
        one
        TWO
        three
    - mode: '0600'

source_diff:
  file.managed:
    - name: @ROOT@/srv/file_predict/data/src.txt
    - source: salt://file_predict/data/new.txt

hidden:
  file.managed:
    - name: @ROOT@/srv/file_predict/data/hidden.txt
    - contents: changed
    - show_changes: False

to_binary:
  file.managed:
    - name: @ROOT@/srv/file_predict/data/text2bin.txt
    - source: salt://file_predict/data/bin.dat

perms_only:
  file.managed:
    - name: @ROOT@/srv/file_predict/data/perm.txt
    - replace: False
    - mode: '0640'

dir_mode:
  file.directory:
    - name: @ROOT@/srv/file_predict/data/subdir
    - mode: '0700'

append_diff:
  file.append:
    - name: @ROOT@/srv/file_predict/data/append.txt
    - text:
      - new line
      - existing line

replace_diff:
  file.replace:
    - name: @ROOT@/srv/file_predict/data/replace.txt
    - pattern: old
    - repl: new

touch_existing:
  file.touch:
    - name: @ROOT@/srv/file_predict/data/touch.txt

absent_existing:
  file.absent:
    - name: @ROOT@/srv/file_predict/data/absent.txt

link_forced:
  file.symlink:
    - name: @ROOT@/srv/file_predict/data/linkme.txt
    - target: @ROOT@/srv/file_predict/data/conf.txt
    - force: True
