#!/usr/bin/env bash
# The jitload container's one entrypoint (under tini): starts sshd and JupyterLab as the container's user,
# prints how to connect, and exits as soon as either service exits, stopping the other.
# Settings (environment): SSH_AUTHORIZED_KEYS (key text) or SSH_AUTHORIZED_KEYS_FILE (a mounted file);
# JUPYTER_TOKEN (generated and printed if unset); JITLOAD_BIND, JITLOAD_SSH_PORT, JITLOAD_JUPYTER_PORT;
# JITLOAD_STATE_DIR (host keys, authorized keys); JITLOAD_CONFIG_DIR (sshd_config, jupyter_server_config.py).
set -euo pipefail

bind=${JITLOAD_BIND:-0.0.0.0}
ssh_port=${JITLOAD_SSH_PORT:-22}
jupyter_port=${JITLOAD_JUPYTER_PORT:-8888}
state=${JITLOAD_STATE_DIR:-$HOME/.jitload-container}
config=${JITLOAD_CONFIG_DIR:-/etc/jitload}
mkdir -p "$state"
# 755/644: a root sshd reads authorized_keys as the user logging in; the host key itself stays 600.
chmod 755 "$state"

# Host keys are made at the first start and kept in the state folder: never baked into the image.
if [ ! -f "$state/ssh_host_ed25519_key" ]; then
    ssh-keygen -q -t ed25519 -N '' -C "jitload-container" -f "$state/ssh_host_ed25519_key"
fi

keys="$state/authorized_keys"
: > "$keys"
if [ -n "${SSH_AUTHORIZED_KEYS:-}" ]; then
    printf '%s\n' "$SSH_AUTHORIZED_KEYS" >> "$keys"
fi
if [ -n "${SSH_AUTHORIZED_KEYS_FILE:-}" ]; then
    cat "$SSH_AUTHORIZED_KEYS_FILE" >> "$keys"
fi
chmod 644 "$keys"
if [ ! -s "$keys" ]; then
    echo "jitload: no SSH key given (SSH_AUTHORIZED_KEYS or SSH_AUTHORIZED_KEYS_FILE): nobody can log in" >&2
fi

token_note="(your JUPYTER_TOKEN)"
if [ -z "${JUPYTER_TOKEN:-}" ]; then
    JUPYTER_TOKEN=$(python -c 'import secrets; print(secrets.token_hex(24))')
    token_note=$JUPYTER_TOKEN
fi
export JUPYTER_TOKEN JITLOAD_BIND="$bind" JITLOAD_JUPYTER_PORT="$jupyter_port"

if [ "$(id -u)" = 0 ]; then
    mkdir -p /run/sshd  # a root sshd needs its privilege-separation folder
fi
/usr/sbin/sshd -D -e -f "$config/sshd_config" -o "Port=$ssh_port" -o "ListenAddress=$bind" \
    -o "HostKey=$state/ssh_host_ed25519_key" -o "AuthorizedKeysFile=$keys" -o "PidFile=$state/sshd.pid" &
sshd_pid=$!

jupyter_args=(--config="$config/jupyter_server_config.py")
if [ "$(id -u)" = 0 ]; then
    jupyter_args+=(--allow-root)
fi
jupyter lab "${jupyter_args[@]}" &
jupyter_pid=$!

cat <<MSG
jitload container: JupyterLab and sshd are starting
  JupyterLab  http://localhost:${JITLOAD_JUPYTER_HOST_PORT:-$jupyter_port}/lab?token=$token_note
  SSH         ssh -p ${JITLOAD_SSH_HOST_PORT:-2222} $(id -un)@localhost   (with the key you gave)
  VS Code     Remote-SSH to the same host and port; or ssh -L 8888:localhost:8888 for JupyterLab
MSG

stop() { kill -TERM "$sshd_pid" "$jupyter_pid" 2>/dev/null || true; }
trap stop TERM INT
status=0
wait -n "$sshd_pid" "$jupyter_pid" || status=$?
echo "jitload: a service exited (status $status); stopping the other" >&2
stop
wait || true
exit "$status"
