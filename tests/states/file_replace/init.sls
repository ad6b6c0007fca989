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
