{% set users = ['alice', 'bob', 'alice'] %}
{% for u in users | unique %}
user_{{ u }}:
  test.succeed_without_changes:
    - comment: {{ u | upper }} on {{ grains['kernel'] }} {{ loop.index }}
{% endfor %}
{% if grains.get('nosuchgrain') is none %}
nograin:
  test.nop
{% endif %}
data:
  test.show_notification:
    - text: {{ {'b': 1, 'a': [1, 2]} | json }}
yaml:
  test.show_notification:
    - text: '{{ {'k': 'v'} | yaml }}'
bools:
  test.show_notification:
    - text: "{{ 'yes' | to_bool }} {{ 0 | to_bool }} {{ [1] | sequence }} {{ 'x' | sequence }}"
regex:
  test.show_notification:
    - text: "{{ 'abc123' | regex_search('([a-z]+)([0-9]+)') }} {{ 'abc' | regex_match('b') }} {{ 'a-b-c' | regex_replace('-', '+') }}"
context:
  test.show_notification:
    - text: "{{ sls }} {{ slspath }} {{ tpldir }} {{ tplfile }} {{ saltenv }}"
dictsort:
  test.show_notification:
    - text: "{% for k, v in {'z': 1, 'a': 2} | dictsort %}{{ k }}={{ v }} {% endfor %}"
