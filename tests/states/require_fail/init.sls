depends:
  test.succeed_without_changes:
    - require:
      - test: broken
broken:
  test.fail_without_changes
indirect:
  test.nop:
    - require:
      - depends
