#!/usr/bin/env bash
# apt-install.sh PKG... installs Debian packages that are not installed yet,
# without recommends and without starting their services (a package such as
# prometheus would otherwise start a server on :9090 in the middle of the tests).
set -euo pipefail

missing=()
for p in "$@"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "apt-install.sh: need root to install: ${missing[*]}" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
policy=/usr/sbin/policy-rc.d
own_policy=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 0755 "$policy"
	own_policy=1
fi
cleanup() { if [ -n "$own_policy" ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

echo ">> apt-get install ${missing[*]}"
# An install from a stale or empty package list fails: update once and retry.
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/apt-install.log 2>&1; then
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/apt-install.log 2>&1 ||
		{ cat /tmp/apt-install.log >&2; exit 1; }
fi
