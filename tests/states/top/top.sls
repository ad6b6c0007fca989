base:
  '*':
    - top.common
  'no-such-minion':
    - top.never
  'G@kernel:Linux':
    - top.linux
  'kernel:Linux':
    - match: grain
    - top.grain
