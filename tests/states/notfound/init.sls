a:
  test.no_such_function
b:
  nosuchstate.present
