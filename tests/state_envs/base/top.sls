base:
  '*':
    - common
    - dev: tools
    - qa: nowhere
prod:
  'nomatch':
    - never
