#!yaml
plain_yaml:
  test.show_notification:
    - text: "{{ not rendered }}"
