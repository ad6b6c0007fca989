# Modes: set on a new file and changed on an existing one, replace:
# False (permissions only), create: False, and a mode that is not octal.
made:
  file.managed:
    - name: @ROOT@/perms_a.txt
    - contents: a
    - mode: 600

changed:
  file.managed:
    - name: @ROOT@/perms_a.txt
    - contents: a
    - mode: '0644'

perms_only:
  file.managed:
    - name: @ROOT@/perms_a.txt
    - replace: False
    - mode: '0604'

not_created:
  file.managed:
    - name: @ROOT@/perms_never.txt
    - contents: x
    - create: False

created_empty:
  file.managed:
    - name: @ROOT@/perms_empty.txt

bad_mode:
  file.managed:
    - name: @ROOT@/perms_bad.txt
    - contents: x
    - mode: '0abc'

keep_with_contents:
  file.managed:
    - name: @ROOT@/perms_keep.txt
    - contents: x
    - mode: keep
