# file.symlink: made, already right, pointed elsewhere, with its parents,
# a file in the way (refused, then forced), a missing parent.
target:
  file.managed:
    - name: @ROOT@/links/target.txt
    - contents: t
    - makedirs: True

other:
  file.managed:
    - name: @ROOT@/links/other.txt
    - contents: o

link:
  file.symlink:
    - name: @ROOT@/links/link
    - target: @ROOT@/links/target.txt

relative_target:
  file.symlink:
    - name: @ROOT@/links/rel
    - target: target.txt

repointed_first:
  file.symlink:
    - name: @ROOT@/links/moving
    - target: @ROOT@/links/target.txt

repointed:
  file.symlink:
    - name: @ROOT@/links/moving
    - target: @ROOT@/links/other.txt

deep:
  file.symlink:
    - name: @ROOT@/links/x/y/link
    - target: @ROOT@/links/target.txt
    - makedirs: True

no_parent:
  file.symlink:
    - name: @ROOT@/links/nodir/link
    - target: @ROOT@/links/target.txt

in_the_way:
  file.managed:
    - name: @ROOT@/links/occupied
    - contents: x
    - replace: False

refused:
  file.symlink:
    - name: @ROOT@/links/occupied
    - target: @ROOT@/links/target.txt
    - require:
      - file: in_the_way

in_the_way_too:
  file.managed:
    - name: @ROOT@/links/forced
    - contents: x
    - replace: False

forced:
  file.symlink:
    - name: @ROOT@/links/forced
    - target: @ROOT@/links/target.txt
    - force: True
    - require:
      - file: in_the_way_too

through_link:
  file.managed:
    - name: @ROOT@/links/link
    - contents: written through the link
    - require:
      - file: link

to_replace:
  file.symlink:
    - name: @ROOT@/links/replaced
    - target: @ROOT@/links/other.txt

replaced_by_file:
  file.managed:
    - name: @ROOT@/links/replaced
    - contents: now a file
    - follow_symlinks: False
    - require:
      - file: to_replace
