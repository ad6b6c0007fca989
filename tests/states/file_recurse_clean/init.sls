# file.recurse with clean: what the recurse does not manage is removed
# (one path per directory, so Salt's set of removed paths has one order),
# what exclude_pat names is spared; a stray directory goes whole.
stray_file:
  file.managed:
    - name: @ROOT@/rclean/a/stray.txt
    - contents: stray
    - makedirs: True

clean_a:
  file.recurse:
    - name: @ROOT@/rclean/a
    - source: salt://file_recurse_clean/tree
    - clean: True

stray_dir:
  file.managed:
    - name: @ROOT@/rclean/b/straydir/inner.txt
    - contents: stray
    - makedirs: True

spared_log:
  file.managed:
    - name: @ROOT@/rclean/b/kept.log
    - contents: spared
    - makedirs: True

clean_b:
  file.recurse:
    - name: @ROOT@/rclean/b
    - source: salt://file_recurse_clean/tree
    - clean: True
    - exclude_pat: '*.log'

# Nothing stray: in the correct state on the second run.
clean_c:
  file.recurse:
    - name: @ROOT@/rclean/c
    - source: salt://file_recurse_clean/tree
    - clean: True
