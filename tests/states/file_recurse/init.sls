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

# The whole tree (tree_extra, beside it under the same string prefix, is
# not part of it).
plain:
  file.recurse:
    - name: @ROOT@/recurse/plain
    - source: salt://file_recurse/tree/

# Modes, and what include_pat and exclude_pat (globs and E@ regexes) let
# through; maxdepth 0 keeps the top level only.
modes:
  file.recurse:
    - name: @ROOT@/recurse/modes
    - source: salt://file_recurse/tree
    - dir_mode: 750
    - file_mode: 640

only_txt:
  file.recurse:
    - name: @ROOT@/recurse/only_txt
    - source: salt://file_recurse/tree
    - include_pat: '*.txt'
    - exclude_pat: 'E@^more/'

not_logs:
  file.recurse:
    - name: @ROOT@/recurse/not_logs
    - source: salt://file_recurse/tree
    - exclude_pat:
      - '*.log'
      - 'top*'

top_level:
  file.recurse:
    - name: @ROOT@/recurse/top_level
    - source: salt://file_recurse/tree
    - maxdepth: 0

# Templates, as file.managed renders them; the first source found wins.
templated:
  file.recurse:
    - name: @ROOT@/recurse/templated
    - source:
      - salt://file_recurse/nosuch
      - salt://file_recurse/conf
    - template: jinja
    - defaults:
        port: 8080

missing:
  file.recurse:
    - name: @ROOT@/recurse/missing
    - source: salt://file_recurse/nosuch
