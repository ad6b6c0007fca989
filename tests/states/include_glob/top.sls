# A top file's SLS names are globs too (web.c is not matched).
base:
  '*':
    - include_glob.web.[ab]
