{% import_yaml 'imports/data.yaml' as data %}
{% import_json 'imports/data.json' as jdata %}
{% import_text 'imports/data.txt' as text %}
{% from 'imports/macros.jinja' import notify with context %}
{{ notify('yaml', data.greeting ~ ' ' ~ data.count) }}
{{ notify('json', jdata.entries | join(',')) }}
{{ notify('text', text | trim) }}
{% include 'imports/more.sls' %}
