#!/usr/bin/env bash
# Debian packages that some tests need; sourced by .ci/run before the test suite.
# Debian packages for tests/test_docs.py (chromium), tests/test_web.py (chromium, chromedriver) and
# tests/test_remote.py (sshd, ssh, rsync, tmux); those tests skip without them. Quiet, bounded in time, and never
# fails the CI run (no apt, no root: just a note).
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
{ command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ]; } || need+=(openssh-server)
for t in chromedriver:chromium-driver ssh:openssh-client rsync:rsync tmux:tmux; do
  command -v "${t%%:*}" >/dev/null 2>&1 || need+=("${t#*:}")
done
if [ "${#need[@]}" -gt 0 ]; then
  sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo -n)
  if command -v apt-get >/dev/null 2>&1 \
     && timeout 900 "${sudo[@]}" apt-get update -qq >/dev/null 2>&1 \
     && timeout 900 "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null 2>&1; then
    echo "[ci] installed ${need[*]}"
  else
    echo "[ci] could not install ${need[*]} (no apt-get, no root or no network); their tests will skip" >&2
  fi
fi
