# A glob include that matches no SLS name is looked for as it is written,
# and is not available.
include:
  - include_glob_none.nomatch*

here:
  test.nop
