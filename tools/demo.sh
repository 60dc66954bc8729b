#!/usr/bin/env bash
# The README's first command: install what is missing, build, then run a
# small "agent" in a sandbox on the built-in default policy and show what
# fusebox decided.  Inside, the agent writes a file in its workspace, tries
# to read a secret in /home, to create .git and to reach the network; then
# `fusebox report` summarises the run's access log.
#
# Idempotent: the demo workspace (/var/tmp/fusebox-demo) and its run
# directory (/var/tmp/fusebox-demo-run) are made afresh on every run and left
# for you to look at; the stand-in secret is removed when the demo ends.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUSEBOX_BUILD_DIR:-$here/build}
"$here/tools/setup.sh"

fusebox=$build/launcher/fusebox
ws=${FUSEBOX_DEMO_WORKSPACE:-/var/tmp/fusebox-demo}
# A stand-in secret where the default policy hides things: /home holds
# other people's files.  Made here so that the refusal is of a real file.
secret_dir=/home/fusebox-demo-secret
secret=$secret_dir/id_ed25519

rm -rf "$ws"
mkdir -p "$ws"
if [ "$(id -u)" -eq 0 ]; then
  mkdir -p "$secret_dir"
  echo "stand-in secret: if the sandbox printed this, it failed" >"$secret"
  chmod 0644 "$secret"
else
  # /home is not ours to write: use a file of our own HOME, which the
  # default policy replaces with an empty private one.
  secret=$HOME/.fusebox-demo-secret
  echo "stand-in secret: if the sandbox printed this, it failed" >"$secret"
fi

# The network check aims at a listener of our own on the host's loopback:
# inside, the sandbox has a loopback of its own, so the connection must fail,
# and the listener must see nothing.  No traffic ever leaves this machine.
listener_log=$(mktemp)
python3 - "$listener_log" <<'PY' &
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
with open(sys.argv[1], "w") as f:
    f.write(f"{s.getsockname()[1]}\n")
s.settimeout(10)
try:
    c, _ = s.accept()
    with open(sys.argv[1], "a") as f:
        f.write("connected\n")
except socket.timeout:
    pass
PY
listener=$!
for _ in $(seq 100); do [ -s "$listener_log" ] && break; sleep 0.05; done
port=$(head -1 "$listener_log")
cleanup() {
  kill "$listener" 2>/dev/null || true
  rm -f "$listener_log"
  if [ "$(id -u)" -eq 0 ]; then rm -rf "$secret_dir"; else rm -f "$secret"; fi
}
trap cleanup EXIT

# The "agent": plain shell, each step printing what happened to it.
agent='
echo "hello from the sandbox" > notes.txt && echo "  wrote notes.txt"
if cat "$1" 2>/dev/null; then echo "  READ THE SECRET (the sandbox failed)"; else echo "  could not read $1"; fi
if mkdir .git 2>/dev/null; then echo "  CREATED .git (the sandbox failed)"; else echo "  could not create .git"; fi
if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then echo "  REACHED the host'"'"'s 127.0.0.1:$2 (the sandbox failed)"; else echo "  could not reach the host'"'"'s 127.0.0.1:$2"; fi
'

echo "== fusebox run (built-in default policy, workspace $ws)"
cd "$ws"
status=0
run_dir=/var/tmp/fusebox-demo-run
rm -rf "$run_dir"
"$fusebox" run --run-dir "$run_dir" --setenv LC_ALL C -- /bin/bash -c "$agent" agent "$secret" "$port" || status=$?
kill $listener 2>/dev/null || true
wait $listener 2>/dev/null || true
echo "   exit status $status; on the host: $(ls -A "$ws" | tr '\n' ' ')"
if grep -q connected "$listener_log"; then
  echo "   the host's listener on 127.0.0.1:$port SAW A CONNECTION (the sandbox failed)"
else
  echo "   the host's listener on 127.0.0.1:$port saw no connection"
fi
echo
echo "== fusebox report $run_dir"
"$fusebox" report "$run_dir"
