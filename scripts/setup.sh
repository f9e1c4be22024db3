#!/usr/bin/env bash
# Installs what building, running and testing intercomd need on Debian 12, only what is missing.
#   scripts/setup.sh [--peers]
# --peers also installs the programs the measurement suite compares intercomd with (trx, baresip,
# GStreamer's ALSA elements); scripts/bench-suite.sh asks for them, nothing else needs them.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
    libasound2-dev libopus-dev libspeexdsp-dev   # the C libraries intercomd links
    libsrtp2-dev                                 # SRTP for media (RFC 3711)
    libgpiod-dev                                 # status lights on GPIO lines
    libespeak-ng-dev                             # reading notifications aloud (espeak-ng)
    alsa-utils libasound2-plugins                # aplay/arecord; ALSA's pulse PCM for the virtual rig
    pulseaudio pulseaudio-utils                  # the virtual audio rig (null sinks as rooms)
    espeak-ng sox                                # speech clips and level measurements for tests
    gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good  # an RTP/Opus peer nobody here wrote
    gstreamer1.0-plugins-bad                     # srtpdec: decrypts our SRTP in the interop test
    iproute2                                     # network namespaces: one host per room in the multicast calls test
    libfaketime                                  # a terminal's clock hours off, or at 1970, in the identity tests
    valgrind binutils                            # the measurement suite counts instructions (callgrind) of a stripped copy
    systemd                                      # systemd-analyze verify/security for the unit; systemd-sysusers for the package
    pkg-config
    curl openssl                                 # the site service's tests: a real HTTPS client, the certificate checked by another TLS stack
    chromium chromium-driver                     # the site service's page in a real browser (Selenium, .venv-api)
    prometheus                                   # a real Prometheus scrapes the terminals' metrics (MetricsRigTests)
    python3-venv python3-dev gcc                 # .venv for speech quality measures (pesq builds a C extension); gcc also builds the rig's wall client (scripts/rig-leak.c)
)
PEERS=(trx baresip gstreamer1.0-alsa)           # the suite's side-by-side (SuitePeersTests)
case ${1:-} in
    --peers) PACKAGES+=("${PEERS[@]}") ;;
    "") ;;
    *) echo "usage: scripts/setup.sh [--peers]" >&2; exit 64 ;;
esac

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

# Speech quality measures (STOI, PESQ) for scripts/quality.py, in a project venv of Debian's
# python3; reinstalled only when scripts/quality-requirements.txt changes.
VENV=.venv
REQUIREMENTS=scripts/quality-requirements.txt
stamp=$(sha256sum "$REQUIREMENTS" | cut -c1-16)
if [[ ! -x $VENV/bin/python || $(cat "$VENV/.installed" 2>/dev/null) != "$stamp" ]]; then
    echo "setup: installing the speech quality measures into $VENV (pystoi, pesq)" >&2
    [[ -x $VENV/bin/python ]] || /usr/bin/python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-input wheel >/dev/null
    # numpy first: pesq's build imports it.
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-input \
        "$(grep '^numpy==' "$REQUIREMENTS")" >/dev/null
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-input -r "$REQUIREMENTS" >/dev/null
    "$VENV/bin/python" -c "import pystoi, pesq" || { echo "setup: the quality measures do not import" >&2; exit 1; }
    echo "$stamp" >"$VENV/.installed"
fi

# The API and page checks (schemathesis against the site service's OpenAPI document; Selenium
# driving Debian's chromium through the page), in a venv of their own:
# its dependencies and the quality measures' need not agree.
API_VENV=.venv-api
API_REQUIREMENTS=scripts/api-requirements.txt
api_stamp=$(sha256sum "$API_REQUIREMENTS" | cut -c1-16)
if [[ ! -x $API_VENV/bin/st || $(cat "$API_VENV/.installed" 2>/dev/null) != "$api_stamp" ]]; then
    echo "setup: installing the API and page checks into $API_VENV (schemathesis, selenium, websocket-client)" >&2
    [[ -x $API_VENV/bin/python ]] || /usr/bin/python3 -m venv "$API_VENV"
    "$API_VENV/bin/python" -m pip install -q --disable-pip-version-check --no-input -r "$API_REQUIREMENTS" >/dev/null
    "$API_VENV/bin/st" --version >/dev/null || { echo "setup: schemathesis does not run" >&2; exit 1; }
    "$API_VENV/bin/python" -c "import selenium, websocket" || { echo "setup: selenium or websocket-client does not import" >&2; exit 1; }
    echo "$api_stamp" >"$API_VENV/.installed"
fi
