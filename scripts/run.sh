#!/usr/bin/env bash
# The main job: intercomd in local mode. Far-end speech plays from the terminal's speaker while a
# person in the room talks; the unprocessed and the echo-cancelled microphone are recorded.
# Without a sound card it runs on the virtual audio rig (room "roomA"); with one, pass
#   scripts/run.sh --device plughw:CARD=Device,DEV=0     (see `aplay -L`)
# Results land in out/: far-end.wav, near-end.wav, raw.wav, processed.wav, intercomd.log.
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICE=""
SECONDS_TO_RUN=15
while (($#)); do
    case $1 in
        --device) DEVICE=$2; shift 2 ;;
        --seconds) SECONDS_TO_RUN=$2; shift 2 ;;
        *) echo "usage: scripts/run.sh [--device ALSA_PCM] [--seconds N]" >&2; exit 64 ;;
    esac
done

bash scripts/setup.sh
swift build -c release --product intercomd 2>&1 | tail -n 1
mkdir -p out
espeak-ng -v en-us -s 150 -w out/far-end-22k.wav \
    "Good morning, this is the reception. Doctor Weber, your next patient is waiting in room three. Please come to the front desk when you are ready."
sox out/far-end-22k.wav -r 48000 -c 1 -b 16 out/far-end.wav gain -n -3 && rm out/far-end-22k.wav
espeak-ng -v en+f3 -s 150 -w out/near-end-22k.wav "Thank you, I will be there in two minutes. Please ask the patient to take a seat."
sox out/near-end-22k.wav -r 48000 -c 1 -b 16 out/near-end.wav gain -n -6 && rm out/near-end-22k.wav

run_daemon() { # DEVICE
    cat >out/intercomd.toml <<TOML
[audio]
capture_device = "$1"
playback_device = "$1"
[log]
stats_interval_s = 2
TOML
    .build/release/intercomd --config out/intercomd.toml --far-end out/far-end.wav \
        --record out/processed.wav --record-raw out/raw.wav --duration "$SECONDS_TO_RUN" 2>&1 | tee out/intercomd.log &
    local daemon=$!
    if [[ $1 == roomA ]]; then
        # A talker in the room, after the echo canceller had time to converge.
        sleep $((SECONDS_TO_RUN / 2)); paplay --device=roomA out/near-end.wav || true
    fi
    wait "$daemon"
}

if [[ -n $DEVICE ]]; then
    echo "run: on sound card device '$DEVICE' (speak into the microphone during the second half)"
    run_daemon "$DEVICE"
else
    echo "run: no device given: using the virtual audio rig (room roomA)"
    bash scripts/rig.sh run --dir "$PWD/.rig" --rooms roomA -- bash -c "$(declare -f run_daemon); SECONDS_TO_RUN=$SECONDS_TO_RUN; run_daemon roomA"
fi

echo
echo "run: levels (RMS) of the microphone before and after echo cancellation:"
for f in raw processed; do
    printf '  %-10s %s dBFS\n' "$f" "$(sox out/$f.wav -n stats 2>&1 | awk '/RMS lev dB/ {print $4}')"
done
echo "run: listen to out/raw.wav and out/processed.wav; the log is out/intercomd.log"
