# file.append: to a file that is missing (made first), lines already
# there (also with other whitespace), a list, a source, makedirs.
base:
  file.managed:
    - name: @ROOT@/append/base.txt
    - contents: |
        first line
        key =   value
    - replace: False
    - makedirs: True

one:
  file.append:
    - name: @ROOT@/append/base.txt
    - text: appended line
    - require:
      - file: base

already:
  file.append:
    - name: @ROOT@/append/base.txt
    - text: "key = value"
    - require:
      - file: one

exact:
  file.append:
    - name: @ROOT@/append/base.txt
    - text: "key = value"
    - ignore_whitespace: False
    - require:
      - file: already

list:
  file.append:
    - name: @ROOT@/append/list.txt
    - text:
      - one
      - two
      - one

from_source:
  file.append:
    - name: @ROOT@/append/source.txt
    - source: salt://file_append/files/more.txt

deep:
  file.append:
    - name: @ROOT@/append/x/y/deep.txt
    - text: deep
    - makedirs: True

no_dir:
  file.append:
    - name: @ROOT@/append/nodir/z.txt
    - text: z

hidden:
  file.append:
    - name: @ROOT@/append/hidden.txt
    - text: quiet
    - show_changes: False

specials:
  file.append:
    - name: @ROOT@/append/specials.txt
    - makedirs: True
    - text:
      - 'a (b) [c] $d ^e *f +g ?h {i} |j \k .l #m &n ~o -p'
      - "say \"hi there\" now"
      - "it's   spaced"
