#!/bin/sh
# The `jitload` command inside the container: the package comes from the mounted checkout (PYTHONPATH).
exec python -m jitload "$@"
