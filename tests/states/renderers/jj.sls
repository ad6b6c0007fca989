#!jinja|json
{"from_jinja_json": {"test.show_notification": [{"text": "{{ sls }}"}]}}
