include:
  - slsreq.dep
after:
  test.nop:
    - require:
      - sls: slsreq.dep
