dev:
  '*':
    - app
base:
  '*':
    - ignored_from_dev
