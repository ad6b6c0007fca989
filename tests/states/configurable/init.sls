conf_default:
  test.configurable_test_state
conf_fail:
  test.configurable_test_state:
    - changes: False
    - result: False
    - comment: configured failure
conf_warn:
  test.configurable_test_state:
    - warnings: watch out
