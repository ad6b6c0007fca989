#!/bin/sh
echo "$# arguments"
for a in "$@"; do echo "[$a]"; done
