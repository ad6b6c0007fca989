# file.managed from salt:// sources: one, the first of a list that
# exists, one that is missing, a binary file, and a file changed to
# another source's content.
plain:
  file.managed:
    - name: @ROOT@/source_a.txt
    - source: salt://file_source/files/a.txt

first_found:
  file.managed:
    - name: @ROOT@/source_first.txt
    - source:
      - salt://file_source/files/missing.txt
      - salt://file_source/files/b.txt
      - salt://file_source/files/a.txt

none_found:
  file.managed:
    - name: @ROOT@/source_none.txt
    - source:
      - salt://file_source/files/missing.txt
      - salt://file_source/files/gone.txt

missing:
  file.managed:
    - name: @ROOT@/source_missing.txt
    - source: salt://file_source/files/missing.txt

binary:
  file.managed:
    - name: @ROOT@/source_bin.dat
    - source: salt://file_source/files/bin.dat

with_mode:
  file.managed:
    - name: @ROOT@/source_mode.txt
    - source: salt://file_source/files/a.txt
    - mode: '0640'

swap_a:
  file.managed:
    - name: @ROOT@/source_swap.txt
    - source: salt://file_source/files/a.txt

swap_b:
  file.managed:
    - name: @ROOT@/source_swap.txt
    - source: salt://file_source/files/b.txt

not_replaced:
  file.managed:
    - name: @ROOT@/source_swap.txt
    - source: salt://file_source/files/a.txt
    - replace: False

local_source:
  file.managed:
    - name: @ROOT@/source_local.txt
    - source: @ROOT@/srv/file_source/files/a.txt

local_url:
  file.managed:
    - name: @ROOT@/source_local_url.txt
    - source: file://@ROOT@/srv/file_source/files/b.txt

local_missing:
  file.managed:
    - name: @ROOT@/source_local_missing.txt
    - source: @ROOT@/srv/file_source/files/nothere.txt

local_in_list:
  file.managed:
    - name: @ROOT@/source_local_list.txt
    - source:
      - @ROOT@/srv/file_source/files/nothere.txt
      - @ROOT@/srv/file_source/files/a.txt

web_unverified:
  file.managed:
    - name: @ROOT@/source_web.txt
    - source: https://example.invalid/file.txt
