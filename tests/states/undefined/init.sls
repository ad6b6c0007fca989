a:
  test.show_notification:
    - text: {{ nosuchvariable }}
