#!/bin/sh
echo "to stderr" >&2
exit 3
