#!/usr/bin/env bash
# Installs what building, running and testing intercomd need on Debian 12, only what is missing.
set -euo pipefail

PACKAGES=(
    libasound2-dev libopus-dev libspeexdsp-dev   # the C libraries intercomd links
    alsa-utils libasound2-plugins                # aplay/arecord; ALSA's pulse PCM for the virtual rig
    pulseaudio pulseaudio-utils                  # the virtual audio rig (null sinks as rooms)
    espeak-ng sox                                # speech clips and level measurements for tests
    gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good  # an RTP/Opus peer nobody here wrote
    pkg-config
)

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v swift >/dev/null || { echo "setup: swift is not on PATH (expected Swift 6 in /opt/swift/usr/bin)" >&2; exit 1; }
