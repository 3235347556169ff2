#!/usr/bin/env bash
# Install a Debian package when its command is missing; say clearly what to do when that is impossible.
# usage: scripts/apt-install.sh COMMAND PACKAGE
set -euo pipefail
cmd=$1 pkg=$2
command -v "$cmd" >/dev/null && exit 0
if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null; then
  echo "sizer needs '$cmd': install it with 'apt-get install -y $pkg' as root, then run make again." >&2
  exit 1
fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
if ! command -v apt-get >/dev/null; then
  echo "sizer needs '$cmd' (Debian package '$pkg'); this system has no apt-get: install it with its package manager." >&2
  exit 1
fi
echo "installing $pkg (needed for '$cmd')"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$pkg" >/dev/null
command -v "$cmd" >/dev/null
