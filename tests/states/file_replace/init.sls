# file.replace: a match, none, appended when not found (once), a count,
# a missing file (failed, or ignored), no backup.
conf:
  file.managed:
    - name: @ROOT@/replace/app.conf
    - contents: |
        port=80
        host=localhost
        # comment
    - replace: False
    - makedirs: True

port:
  file.replace:
    - name: @ROOT@/replace/app.conf
    - pattern: '^port=.*$'
    - repl: port=8080
    - require:
      - file: conf

nomatch:
  file.replace:
    - name: @ROOT@/replace/app.conf
    - pattern: '^nothing=.*$'
    - repl: nothing=here
    - require:
      - file: port

appended:
  file.replace:
    - name: @ROOT@/replace/app.conf
    - pattern: '^debug=.*$'
    - repl: debug=true
    - append_if_not_found: True
    - backup: False
    - require:
      - file: nomatch

groups:
  file.replace:
    - name: @ROOT@/replace/app.conf
    - pattern: '^host=(\w+)$'
    - repl: 'host=\1.example'
    - count: 1
    - require:
      - file: appended

missing:
  file.replace:
    - name: @ROOT@/replace/missing.conf
    - pattern: x
    - repl: y

ignored:
  file.replace:
    - name: @ROOT@/replace/missing.conf
    - pattern: x
    - repl: y
    - ignore_if_missing: True

prepended:
  file.replace:
    - name: @ROOT@/replace/app.conf
    - pattern: '^# header$'
    - repl: '# header'
    - prepend_if_not_found: True
    - require:
      - file: groups

not_found_content:
  file.replace:
    - name: @ROOT@/replace/app.conf
    - pattern: '^timeout=\d+$'
    - repl: timeout=99
    - not_found_content: timeout=30
    - append_if_not_found: True
    - show_changes: False
    - require:
      - file: prepended

literal:
  file.replace:
    - name: @ROOT@/replace/app.conf
    - pattern: '^# comment$'
    - repl: '# C:\path\1'
    - backslash_literal: True
    - require:
      - file: not_found_content
