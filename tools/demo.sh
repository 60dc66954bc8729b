#!/usr/bin/env bash
# The README's first command: install what is missing, build, then run a
# small "agent" in a sandbox on the built-in default policy and show what
# fusebox decided.  Inside, the agent writes a file in its workspace, tries
# to read a secret in /home, to create .git and to reach the network; then
# `fusebox report` summarises the run's access log.
#
# Idempotent: the demo workspace and the stand-in secret are made afresh on
# every run; each run adds one run directory under
# ${XDG_STATE_HOME:-~/.local/state}/fusebox/runs (see `fusebox runs`).
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

# The "agent": plain shell, each step printing what happened to it.
agent='
echo "hello from the sandbox" > notes.txt && echo "  wrote notes.txt"
if cat "$1" 2>/dev/null; then echo "  READ THE SECRET (the sandbox failed)"; else echo "  could not read $1"; fi
if mkdir .git 2>/dev/null; then echo "  CREATED .git (the sandbox failed)"; else echo "  could not create .git"; fi
if (exec 3<>/dev/tcp/1.1.1.1/443) 2>/dev/null; then echo "  REACHED 1.1.1.1:443 (the sandbox failed)"; else echo "  could not reach 1.1.1.1:443"; fi
'

echo "== fusebox run (built-in default policy, workspace $ws)"
cd "$ws"
status=0
"$fusebox" run --setenv LC_ALL C -- /bin/bash -c "$agent" agent "$secret" || status=$?
echo "   exit status $status; on the host: $(ls -A "$ws" | tr '\n' ' ')"
echo
echo "== fusebox report (the run's access log, summarised)"
"$fusebox" report
