#!json
{"from_json": {"test.nop": []}}
