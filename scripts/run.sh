#!/usr/bin/env bash
# The main job: intercomd in local mode. Far-end speech plays from the terminal's speaker while a
# person in the room talks; the unprocessed and the echo-cancelled microphone are recorded.
# Without a sound card it runs on the virtual audio rig (room "roomA"); with one, pass
#   scripts/run.sh --device plughw:CARD=Device,DEV=0     (see `aplay -L`)
# Results land in out/: far-end.wav, near-end.wav, raw.wav, processed.wav, intercomd.log.
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICE=""
SECONDS_TO_RUN=16
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
    # The rig's sound server needs ~40 ms of playback buffer to keep its echo path still (see
    # BENCHMARKS.md); a sound card runs with the default 3 periods.
    local periods=3
    [[ $1 == roomA ]] && periods=4
    cat >out/intercomd.toml <<TOML
[audio]
capture_device = "$1"
playback_device = "$1"
buffer_periods = $periods
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

level() { # FILE START LENGTH -> RMS dBFS of that span
    sox "$1" -n trim "$2" "$3" stats 2>&1 | awk '/RMS lev dB/ {print $4}'
}
echo
if [[ -z $DEVICE ]]; then
    # Far end only: from 3 s (echo canceller converged) until shortly before the talker, who
    # starts about half-way (the recording begins once the devices are open, a little late).
    span=$(awk -v h="$SECONDS_TO_RUN" 'BEGIN { print h / 2 - 4.5 }')
    raw=$(level out/raw.wav 3 "$span"); processed=$(level out/processed.wav 3 "$span")
    echo "run: far-end echo in the microphone for $span s from 3 s: raw $raw dBFS, processed $processed dBFS"
    echo "run: echo reduction (ERLE incl. pauses) $(awk -v a="$raw" -v b="$processed" 'BEGIN { printf "%.1f dB", a - b }')"
    echo "run: the talker from $((SECONDS_TO_RUN / 2)) s on should be as loud in processed.wav as in raw.wav:"
    echo "     raw $(level out/raw.wav $((SECONDS_TO_RUN / 2)) 4) dBFS, processed $(level out/processed.wav $((SECONDS_TO_RUN / 2)) 4) dBFS"
else
    echo "run: microphone levels: raw $(level out/raw.wav 0 "$SECONDS_TO_RUN") dBFS, processed $(level out/processed.wav 0 "$SECONDS_TO_RUN") dBFS"
fi
echo "run: listen to out/raw.wav and out/processed.wav; the log is out/intercomd.log"
