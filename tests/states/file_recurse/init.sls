# file.recurse's refusals, which come before the file server is asked
# what a salt:// directory holds: mode (not file_mode), a source that is
# not salt://, a relative name.
with_mode:
  file.recurse:
    - name: @ROOT@/recurse/a
    - source: salt://file_recurse/tree
    - mode: 644

not_salt:
  file.recurse:
    - name: @ROOT@/recurse/b
    - source: /etc

relative:
  file.recurse:
    - name: recurse/c
    - source: salt://file_recurse/tree
