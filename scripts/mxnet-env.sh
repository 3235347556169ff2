#!/usr/bin/env bash
# Build the MXNet environment with the newest installed Python that its pins support.
# mxnet==1.9.1 needs numpy==1.23.5, which has wheels for Python 3.8 to 3.11 only, so the environment
# takes python3.11, 3.10, 3.9 or 3.8, whichever Python sizer itself runs on. Without any of them it
# says in one line what to install and exits 0: `make test` goes on and the MXNet tests skip.
# usage: scripts/mxnet-env.sh VENV_DIR   ($MXNET_PYTHONS overrides the candidates, newest first)
set -euo pipefail
venv=$1
candidates=${MXNET_PYTHONS:-python3.11 python3.10 python3.9 python3.8}

supported() {
  "$1" -c 'import sys; sys.exit(not (3, 8) <= sys.version_info[:2] <= (3, 11))' >/dev/null 2>&1
}

# An environment an earlier try left with an interpreter the pins do not support is built again.
if [ -e "$venv" ] && ! supported "$venv/bin/python"; then
  rm -rf "$venv"
fi
if [ ! -x "$venv/bin/python" ]; then
  base=""
  for python in $candidates; do
    # Only an interpreter that runs counts: pyenv puts shims on PATH for versions it has not selected.
    if supported "$python" && "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
      base=$python
      break
    fi
  done
  if [ -z "$base" ]; then
    echo "mxnet-env skipped: MXNet 1.9.1 needs Python 3.8 to 3.11 (numpy 1.23.5 has no wheels for newer ones);" \
         "install python3.11 and its venv module (Debian: python3.11-venv), then run make again" >&2
    exit 0
  fi
  echo "mxnet-env: $("$base" -c 'import sys; print(sys.executable)') (numpy 1.23.5 supports no newer Python)"
  "$base" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q 'mxnet==1.9.1' 'numpy==1.23.5' pillow
touch "$venv/.installed"
