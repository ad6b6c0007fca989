include:
  - missing.nowhere
here:
  test.nop
