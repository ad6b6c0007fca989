include:
  - exclude.gone
  - exclude.kept
exclude:
  - sls: exclude.gone
  - id: kept_b
main:
  test.nop
