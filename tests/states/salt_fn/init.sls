{% set echoed = salt['test.echo']('from salt') %}
{% set pinged = salt.test.ping() %}
called:
  test.show_notification:
    - text: "{{ echoed }} {{ pinged }}"
