prod:
  '*':
    - web
