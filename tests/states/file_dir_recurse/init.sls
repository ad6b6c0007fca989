# file.directory with recurse, over this tree's own data (under the file
# root): modes set below (dir_mode and file_mode), only so deep
# (max_depth), silenced, directories only (ignore_files), an owner asked
# for and not given, a recurse list Salt refuses.
modes:
  file.directory:
    - name: @ROOT@/srv/file_dir_recurse/data/modes
    - dir_mode: '0750'
    - file_mode: '0640'
    - recurse:
      - mode

depth:
  file.directory:
    - name: @ROOT@/srv/file_dir_recurse/data/depth
    - dir_mode: '0700'
    - file_mode: '0600'
    - max_depth: 1
    - recurse:
      - mode

silent:
  file.directory:
    - name: @ROOT@/srv/file_dir_recurse/data/silent
    - file_mode: '0604'
    - recurse:
      - mode
      - silent

dirs_only:
  file.directory:
    - name: @ROOT@/srv/file_dir_recurse/data/files_only
    - mode: '0711'
    - recurse:
      - mode
      - ignore_files

no_user:
  file.directory:
    - name: @ROOT@/srv/file_dir_recurse/data/owner
    - dir_mode: '0755'
    - file_mode: '0600'
    - recurse:
      - user
      - mode

bogus:
  file.directory:
    - name: @ROOT@/srv/file_dir_recurse/data/owner
    - recurse:
      - bogus

not_a_list:
  file.directory:
    - name: @ROOT@/srv/file_dir_recurse/data/owner
    - recurse: mode

both_ignored:
  file.directory:
    - name: @ROOT@/srv/file_dir_recurse/data/owner
    - recurse:
      - ignore_files
      - ignore_dirs
