# file.managed with template: jinja, from a source (with defaults and
# context) and from contents; an unknown template engine.
conf:
  file.managed:
    - name: @ROOT@/template_app.conf
    - source: salt://file_template/files/conf.j2
    - template: jinja
    - mode: 644
    - defaults:
        port: 80
        users: [alice]
    - context:
        users: [bob, carol]

inline:
  file.managed:
    - name: @ROOT@/template_inline.txt
    - contents: "{% raw %}os is {{ grains['kernel'] }} and x is {{ x }}{% endraw %}"
    - template: jinja
    - context:
        x: 42

unknown_engine:
  file.managed:
    - name: @ROOT@/template_unknown.txt
    - source: salt://file_template/files/conf.j2
    - template: nosuchengine

# What the templates rendered, shown as the diff to other contents.
conf_shown:
  file.managed:
    - name: @ROOT@/template_app.conf
    - contents: rendered above
    - require:
      - file: conf

inline_shown:
  file.managed:
    - name: @ROOT@/template_inline.txt
    - contents: rendered above
    - require:
      - file: inline
