#!/bin/sh
# System packages for tokbench: headless Chromium (the report's browser test), Noto fonts for
# every script the multilingual reports show, groff (man-page sources). Run by `make setup`.
#
# Exit 0 when installed, or when skipped because this is not root with apt-get (CI without root:
# the Chromium test then skips). Exit 1 when an apt step fails — `make setup` then stops and does
# not mark set-up done, so the next `make setup` tries again. Another apt process holding the
# dpkg/apt lock (unattended-upgrades on a fresh machine) is waited for, and each step is retried.
#   SYSTEM_RETRIES (default 5), SYSTEM_RETRY_SLEEP seconds (default 15), APT_LOCK_TIMEOUT seconds
#   each apt call waits for the lock (default 300).
set -u
PACKAGES="chromium fonts-noto-core fonts-noto-cjk groff-base"
RETRIES="${SYSTEM_RETRIES:-5}"
SLEEP="${SYSTEM_RETRY_SLEEP:-15}"
LOCK="${APT_LOCK_TIMEOUT:-300}"

if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "system packages skipped (needs root + apt-get): the report's Chromium test will skip"
  exit 0
fi

retry() {  # retry STEP-NAME COMMAND...: run COMMAND up to RETRIES times
  name="$1"; shift
  i=1
  while :; do
    if "$@"; then return 0; fi
    if [ "$i" -ge "$RETRIES" ]; then
      echo "system packages: $name failed $RETRIES times; set-up is NOT marked done (run make setup again, or SYSTEM=0 to skip)" >&2
      return 1
    fi
    echo "system packages: $name failed (attempt $i of $RETRIES; apt lock held?), retrying in ${SLEEP}s" >&2
    i=$((i + 1))
    sleep "$SLEEP"
  done
}

export DEBIAN_FRONTEND=noninteractive
retry "apt-get update" apt-get -qq -o "DPkg::Lock::Timeout=$LOCK" update || exit 1
# shellcheck disable=SC2086  # PACKAGES is a word list
retry "apt-get install" apt-get -qq -o "DPkg::Lock::Timeout=$LOCK" install -y \
  --no-install-recommends $PACKAGES || exit 1
echo "system packages: chromium, Noto fonts and groff installed"
