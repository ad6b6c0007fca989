# user and group that a file, a directory and a link already have (the
# ones the agent's files get): nothing to change.
file:
  file.managed:
    - name: @ROOT@/owner/file.txt
    - contents: x
    - user: {{ grains['username'] }}
    - group: {{ grains['groupname'] }}
    - makedirs: True

dir:
  file.directory:
    - name: @ROOT@/owner/dir
    - user: {{ grains['username'] }}
    - group: {{ grains['groupname'] }}

link:
  file.symlink:
    - name: @ROOT@/owner/link
    - target: @ROOT@/owner/file.txt
    - user: {{ grains['username'] }}
    - group: {{ grains['groupname'] }}
