salt://cmd_script/hello.sh:
  cmd.script

with_source:
  cmd.script:
    - source: salt://cmd_script/args.sh
    - args: "one 'two three'"

args_from_name:
  cmd.script:
    - name: ignored first 'second word'
    - source: salt://cmd_script/args.sh

args_list:
  cmd.script:
    - source: salt://cmd_script/args.sh
    - args:
      - a
      - b c

name_with_args_no_source:
  cmd.script:
    - name: salt://cmd_script/args.sh x y

missing:
  cmd.script:
    - source: salt://cmd_script/nosuch.sh

fails:
  cmd.script:
    - source: salt://cmd_script/fails.sh

tolerated:
  cmd.script:
    - source: salt://cmd_script/fails.sh
    - success_retcodes: [3]

noshebang:
  cmd.script:
    - source: salt://cmd_script/noshebang.sh

hidden:
  cmd.script:
    - source: salt://cmd_script/hello.sh
    - hide_output: True

skipped:
  cmd.script:
    - source: salt://cmd_script/hello.sh
    - unless: 'true'

bad_env:
  cmd.script:
    - source: salt://cmd_script/hello.sh
    - env: "A=b"

bad_context:
  cmd.script:
    - source: salt://cmd_script/hello.sh
    - context: [1, 2]

trigger:
  test.succeed_with_changes

waits:
  cmd.wait_script:
    - source: salt://cmd_script/args.sh
    - args: watched
    - watch:
      - test: trigger

waits_unwatched:
  cmd.wait_script:
    - source: salt://cmd_script/hello.sh
