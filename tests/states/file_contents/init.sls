# file.managed with contents: a string, a list, contents_newline, an
# existing file's diff, show_changes and allow_empty.
one_line:
  file.managed:
    - name: @ROOT@/contents_one.txt
    - contents: hello

many_lines:
  file.managed:
    - name: @ROOT@/contents_many.txt
    - contents:
      - first
      - second line
      - "third\nfourth"

no_newline:
  file.managed:
    - name: @ROOT@/contents_nonl.txt
    - contents: |
        a
        b
    - contents_newline: False

before:
  file.managed:
    - name: @ROOT@/contents_changed.txt
    - contents: |
        alpha
        beta
        gamma

after:
  file.managed:
    - name: @ROOT@/contents_changed.txt
    - contents: |
        alpha
        BETA
        gamma
        delta

hidden_before:
  file.managed:
    - name: @ROOT@/contents_hidden.txt
    - contents: secret one

hidden_after:
  file.managed:
    - name: @ROOT@/contents_hidden.txt
    - contents: secret two
    - show_changes: False

empty_allowed:
  file.managed:
    - name: @ROOT@/contents_empty.txt
    - contents: ''

empty_refused:
  file.managed:
    - name: @ROOT@/contents_refused.txt
    - contents: ''
    - allow_empty: False

both:
  file.managed:
    - name: @ROOT@/contents_both.txt
    - contents: x
    - source: salt://file_contents/init.sls

nothing:
  file.managed:
    - name: @ROOT@/contents_nothing.txt

relative:
  file.managed:
    - name: contents/relative.txt
    - contents: x

a_directory:
  file.managed:
    - name: @ROOT@
    - contents: x

from_grain:
  file.managed:
    - name: @ROOT@/contents_grain.txt
    - contents_grains: kernel

from_grains:
  file.managed:
    - name: @ROOT@/contents_grains.txt
    - contents_grains:
      - kernel
      - os_family

no_such_grain:
  file.managed:
    - name: @ROOT@/contents_nograin.txt
    - contents_grains: no:such:grain

two_kinds:
  file.managed:
    - name: @ROOT@/contents_two.txt
    - contents: x
    - contents_grains: kernel
