#!/usr/bin/env bash
# The main job: a small practice at work on the virtual audio rig (no sound card needed).
#
#   scripts/run.sh                   three terminals (Empfang, Behandlung 1, Labor) from one practice
#                                    description: a key at Empfang calls Behandlung 1 (its chime, the
#                                    answer), speech both ways with the mouth-to-ear delay and PESQ-WB/STOI,
#                                    hang-up by key, a notification from Behandlung 1 to the lab read aloud,
#                                    reminded and acknowledged by key (the sender told), an emergency call
#                                    through do-not-disturb; a line per step, then a table
#   scripts/run.sh --short           the same, shortest form (the test command runs it)
#   scripts/run.sh --streaming       two rooms streaming their microphones at each other without calls;
#                                    a talker in room A heard from room B's speaker
#   scripts/run.sh --device PCM --peer HOST:PORT     one terminal on a real sound card, streaming to and
#                  [--listen PORT] [--seconds N]     from a peer terminal (talk into the microphone)
#   scripts/run.sh --local [--device PCM] [--seconds N]
#                                    local mode (no network): far-end speech from the speaker, echo
#                                    cancellation of the microphone
#
# Results land in out/: the practice in out/practice/ (each room's speaker over the whole run,
# <room>-speaker.wav; what each talker said and what the other room heard; the logs; the
# configuration), --streaming in out/streaming/. Local mode: far-end.wav, near-end.wav, raw.wav,
# processed.wav, intercomd.log. Sound card: intercomd.log.
# INTERCOM_BUILD: the swift build arguments (default "-c release"; the test command passes its own
# so that nothing is built twice). INTERCOM_RIG_DIR: the rig's folder (default .rig).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 64
}

MODE=practice
SHORT=()
DEVICE=""
PEER=""
LISTEN=5004
SECONDS_TO_RUN=""
while (($#)); do
    case $1 in
        --short) SHORT=(--short); shift ;;
        --streaming) MODE=streaming; shift ;;
        --device) (($# >= 2)) || usage; DEVICE=$2; MODE=card; shift 2 ;;
        --peer) (($# >= 2)) || usage; PEER=$2; shift 2 ;;
        --listen) (($# >= 2)) || usage; LISTEN=$2; shift 2 ;;
        --seconds) (($# >= 2)) || usage; SECONDS_TO_RUN=$2; shift 2 ;;
        --local) LOCAL=yes; shift ;;
        -h | --help) usage ;;
        *) echo "run: unknown argument '$1'" >&2; usage ;;
    esac
done
[[ ${LOCAL:-} == yes ]] && MODE=local
if [[ $MODE == card && -z $PEER ]]; then
    echo "run: with --device, give the other terminal with --peer HOST:PORT (or use --local)" >&2
    exit 64
fi
[[ $MODE == local || $MODE == card || -z $PEER ]] || { echo "run: --peer needs --device (a sound card)" >&2; exit 64; }
[[ ${#SHORT[@]} -eq 0 || $MODE == practice || $MODE == streaming ]] || { echo "run: --short is for the practice and --streaming" >&2; exit 64; }

# ------------------------------------------------------------------ preparation

bash scripts/setup.sh
read -r -a BUILD <<<"${INTERCOM_BUILD:--c release}"
swift build "${BUILD[@]}" --product intercomd 2>&1 | tail -n 1
BIN=$(swift build "${BUILD[@]}" --show-bin-path)
INTERCOMD=$BIN/intercomd
RIG_DIR=${INTERCOM_RIG_DIR:-$PWD/.rig}
mkdir -p out

# Whatever happens, no daemon started here outlives the script: the demo stops its own on a
# signal; this catches the rest (a crash) by the folder their configuration is in.
stop_leftovers() { pkill -TERM -f -- "intercomd --config $PWD/out/" 2>/dev/null || true; }
trap stop_leftovers EXIT
trap 'stop_leftovers; exit 130' INT TERM HUP

# ------------------------------------------------------------------ the practice, or two rooms streaming

if [[ $MODE == practice || $MODE == streaming ]]; then
    swift build "${BUILD[@]}" --product intercom-demo 2>&1 | tail -n 1
    if [[ $MODE == practice ]]; then
        rooms=empfang,behandlung1,labor; folder=$PWD/out/practice; args=()
        echo "run: a small practice on the virtual audio rig (release build): three terminals, keys, calls, a notification"
    else
        rooms=roomA,roomB; folder=$PWD/out/streaming; args=(--streaming)
        echo "run: two rooms streaming at each other on the virtual audio rig (release build)"
    fi
    bash scripts/rig.sh run --dir "$RIG_DIR" --rooms "$rooms" -- "$BIN/intercom-demo" --out "$folder" "${args[@]}" "${SHORT[@]}"
    exit $?
fi

# ------------------------------------------------------------------ one terminal on a sound card

if [[ $MODE == card ]]; then
    cat >out/intercomd.toml <<TOML
[audio]
capture_device = "$DEVICE"
playback_device = "$DEVICE"
[network]
listen_port = $LISTEN
peers = ["$PEER"]
[log]
stats_interval_s = 2
[control]
socket = "$PWD/out/intercomd.sock"
# A fixed stream between two boxes goes in the clear: lab mode, named so in the log.
[security]
mode = "lab"
TOML
    echo "run: intercomd on '$DEVICE', receiving on UDP $LISTEN, sending to $PEER; talk into the microphone"
    echo "     (Ctrl-C stops it${SECONDS_TO_RUN:+; or after $SECONDS_TO_RUN s}); the log is out/intercomd.log"
    args=(--config out/intercomd.toml)
    [[ -z $SECONDS_TO_RUN ]] || args+=(--duration "$SECONDS_TO_RUN")
    "$INTERCOMD" "${args[@]}" 2>&1 | tee out/intercomd.log
    exit "${PIPESTATUS[0]}"
fi

# ------------------------------------------------------------------ local mode (no network)

speech() { # FILE VOICE GAIN_DB TEXT
    espeak-ng -v "$2" -s 150 -w "$1.22k.wav" "$4"
    sox "$1.22k.wav" -r 48000 -c 1 -b 16 "$1" gain -n "$3"
    rm -f "$1.22k.wav"
}

level() { # FILE START LENGTH -> RMS dBFS of that span
    sox "$1" -n trim "$2" "$3" stats 2>&1 | awk '/RMS lev dB/ {print $4}'
}


SECONDS_TO_RUN=${SECONDS_TO_RUN:-16}
speech out/far-end.wav en-us -3 "Good morning, this is the reception. Doctor Weber, your next patient is waiting in room three. Please come to the front desk when you are ready."
speech out/near-end.wav en+f3 -6 "Thank you, I will be there in two minutes. Please ask the patient to take a seat."

run_local() { # DEVICE
    # The rig's sound server needs ~40 ms of playback buffer to keep its echo path still (see
    # BENCHMARKS.md); a sound card runs with the default 3 periods.
    local periods=3
    [[ $1 == roomA ]] && periods=4
    cat >out/intercomd.toml <<TOML
[audio]
capture_device = "$1"
playback_device = "$1"
buffer_periods = $periods
[network]
listen_port = 0
[log]
stats_interval_s = 2
[control]
socket = "$PWD/out/intercomd.sock"
TOML
    "$INTERCOMD" --config out/intercomd.toml --far-end out/far-end.wav \
        --record out/processed.wav --record-raw out/raw.wav --duration "$SECONDS_TO_RUN" 2>&1 | tee out/intercomd.log &
    local daemon=$!
    if [[ $1 == roomA ]]; then
        # A talker in the room, after the echo canceller had time to converge.
        sleep $((SECONDS_TO_RUN / 2)); paplay --device=roomA out/near-end.wav || true
    fi
    wait "$daemon"
}

if [[ -n $DEVICE ]]; then
    echo "run: local mode on sound card device '$DEVICE' (speak into the microphone during the second half)"
    run_local "$DEVICE"
else
    echo "run: local mode on the virtual audio rig (room roomA)"
    bash scripts/rig.sh run --dir "$RIG_DIR" --rooms roomA -- bash -c "$(declare -f run_local); INTERCOMD='$INTERCOMD'; SECONDS_TO_RUN=$SECONDS_TO_RUN; run_local roomA"
fi

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
