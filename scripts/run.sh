#!/usr/bin/env bash
# The main job: two intercom rooms talking over the network.
#
#   scripts/run.sh                                   two rooms on the virtual audio rig (no sound card
#                                                    needed): a talker in room A's air is heard from
#                                                    room B's speaker; prints the mouth-to-ear delay
#                                                    and the speech quality (STOI, PESQ)
#   scripts/run.sh --device PCM --peer HOST:PORT     one terminal on a real sound card, streaming to and
#                  [--listen PORT] [--seconds N]     from a peer terminal (talk into the microphone)
#   scripts/run.sh --local [--device PCM] [--seconds N]
#                                                    local mode (no network): far-end speech from the
#                                                    speaker, echo cancellation of the microphone
#
# INTERCOM_RUN_EXTRA_CONFIG: TOML text appended to both rooms' configuration (experiments, e.g.
# $'[echo]\nnoise_suppress_db = 0').
# Results land in out/. Two rooms: source.wav (what room A's talker said), roomB-speaker.wav (what
# room B's speaker played), roomA.log, roomB.log. Local mode: far-end.wav, near-end.wav,
# raw.wav, processed.wav, intercomd.log. Sound card: intercomd.log.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 64
}

MODE=rooms
DEVICE=""
PEER=""
LISTEN=5004
SECONDS_TO_RUN=""
INTERNAL=""
while (($#)); do
    case $1 in
        --device) (($# >= 2)) || usage; DEVICE=$2; shift 2 ;;
        --peer) (($# >= 2)) || usage; PEER=$2; shift 2 ;;
        --listen) (($# >= 2)) || usage; LISTEN=$2; shift 2 ;;
        --seconds) (($# >= 2)) || usage; SECONDS_TO_RUN=$2; shift 2 ;;
        --local) MODE=local; shift ;;
        --two-rooms-on-rig) INTERNAL=two-rooms; shift ;;  # internal: the part that runs inside the rig
        -h | --help) usage ;;
        *) echo "run: unknown argument '$1'" >&2; usage ;;
    esac
done
if [[ $MODE == rooms && -n $DEVICE && -z $PEER ]]; then
    echo "run: with --device, give the other terminal with --peer HOST:PORT (or use --local)" >&2
    exit 64
fi
[[ $MODE == local || -z $PEER || -n $DEVICE ]] || { echo "run: --peer needs --device (a sound card)" >&2; exit 64; }

INTERCOMD=.build/release/intercomd
PYTHON=.venv/bin/python

# ------------------------------------------------------------------ two rooms on the rig (inside)

free_port() { "$PYTHON" -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

room_config() { # ROOM LISTEN PEER_PORT
    cat <<TOML
[audio]
capture_device = "$1"
playback_device = "$1"
[network]
listen_port = $2
peers = ["127.0.0.1:$3"]
[log]
stats_interval_s = 2
${INTERCOM_RUN_EXTRA_CONFIG:-}
TOML
}

wait_for_log() { # FILE TEXT
    local i
    for ((i = 0; i < 100; i++)); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "run: '$2' did not appear in $1:" >&2
    tail -n 20 "$1" >&2
    return 1
}

two_rooms_inside_rig() {
    local port_a port_b pids=()
    port_a=$(free_port)
    port_b=$(free_port)
    room_config roomA "$port_a" "$port_b" >out/roomA.toml
    room_config roomB "$port_b" "$port_a" >out/roomB.toml
    "$INTERCOMD" --config out/roomA.toml >out/roomA.log 2>&1 &
    pids+=($!)
    "$INTERCOMD" --config out/roomB.toml >out/roomB.log 2>&1 &
    pids+=($!)
    trap 'kill -TERM "${pids[@]}" 2>/dev/null || true' EXIT
    wait_for_log out/roomA.log "audio thread"
    wait_for_log out/roomB.log "audio thread"
    echo "run: room A (UDP $port_a) and room B (UDP $port_b) are streaming to each other"
    sleep 1.5  # the streams start and the jitter buffers settle

    # The talker and the ear on one clock (scripts/talk_listen.py, real ALSA): it plays source.wav
    # into room A's air after a 300 ms lead-in, records room B's speaker, and measures the delay.
    echo "run: a talker speaks into room A's air ($(soxi -D out/source.wav | cut -c1-4) s); recording room B's speaker"
    "$PYTHON" scripts/talk_listen.py --mouth roomA_air --ear roomB --clip out/source.wav \
        --out out/roomB-speaker.wav >out/talk_listen.json
    # B first, while A still sends: B's final statistics then describe the stream as it ran.
    kill -TERM "${pids[1]}"
    wait "${pids[1]}" || true
    kill -TERM "${pids[0]}"
    wait "${pids[0]}" || true
    trap - EXIT
}

if [[ $INTERNAL == two-rooms ]]; then
    two_rooms_inside_rig
    exit 0
fi

# ------------------------------------------------------------------ preparation

bash scripts/setup.sh
swift build -c release --product intercomd 2>&1 | tail -n 1
mkdir -p out

speech() { # FILE VOICE GAIN_DB TEXT
    espeak-ng -v "$2" -s 150 -w "$1.22k.wav" "$4"
    sox "$1.22k.wav" -r 48000 -c 1 -b 16 "$1" gain -n "$3"
    rm -f "$1.22k.wav"
}

level() { # FILE START LENGTH -> RMS dBFS of that span
    sox "$1" -n trim "$2" "$3" stats 2>&1 | awk '/RMS lev dB/ {print $4}'
}

# ------------------------------------------------------------------ one terminal on a sound card

if [[ $MODE == rooms && -n $DEVICE ]]; then
    cat >out/intercomd.toml <<TOML
[audio]
capture_device = "$DEVICE"
playback_device = "$DEVICE"
[network]
listen_port = $LISTEN
peers = ["$PEER"]
[log]
stats_interval_s = 2
TOML
    echo "run: intercomd on '$DEVICE', receiving on UDP $LISTEN, sending to $PEER; talk into the microphone"
    echo "     (Ctrl-C stops it${SECONDS_TO_RUN:+; or after $SECONDS_TO_RUN s}); the log is out/intercomd.log"
    args=(--config out/intercomd.toml)
    [[ -z $SECONDS_TO_RUN ]] || args+=(--duration "$SECONDS_TO_RUN")
    "$INTERCOMD" "${args[@]}" 2>&1 | tee out/intercomd.log
    exit "${PIPESTATUS[0]}"
fi

# ------------------------------------------------------------------ two rooms on the rig

if [[ $MODE == rooms ]]; then
    speech out/source.wav en-us -3 "Room one calling. The delivery for the pharmacy has arrived at the back entrance. Could somebody from the ward come down to sign for it, please?"
    rm -f out/roomB-speaker.wav out/talk_listen.json
    echo "run: two rooms on the virtual audio rig (roomA, roomB), release build"
    bash scripts/rig.sh run --dir "${INTERCOM_RIG_DIR:-$PWD/.rig}" --rooms roomA,roomB -- bash scripts/run.sh --two-rooms-on-rig
    echo
    [[ -s out/roomB-speaker.wav && -s out/talk_listen.json ]] || { echo "run: nothing was recorded" >&2; exit 1; }
    quality=$("$PYTHON" scripts/quality.py out/source.wav out/roomB-speaker.wav | tail -n 1)
    field() { "$PYTHON" -c 'import json, sys; v = json.loads(sys.argv[1]).get(sys.argv[2]); print("-" if v is None else v)' "$1" "$2"; }
    timing=$(cat out/talk_listen.json)
    echo "run: room A's talker, heard from room B's speaker:"
    echo "     mouth-to-ear delay $(field "$timing" mouth_to_ear_ms) ms (air -> A's microphone -> echo canceller -> Opus -> UDP"
    echo "       -> B's jitter buffer -> mix -> B's speaker; the rig adds ~1 ms per pass)"
    echo "     intelligibility STOI $(field "$quality" stoi) (0..1; the tests require >= 0.80), PESQ-WB $(field "$quality" pesq_wb) (MOS 1..4.5)"
    echo "     level $(field "$quality" level_db) dBFS (the source: $(level out/source.wav 0 60) dBFS)"
    grep -h "final network" out/roomB.log | sed 's/.*final network:/run: room B received:/' || true
    echo "run: listen to out/source.wav and out/roomB-speaker.wav; logs: out/roomA.log, out/roomB.log"
    exit 0
fi

# ------------------------------------------------------------------ local mode (no network)

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
    echo "run: local mode on sound card device '$DEVICE' (speak into the microphone during the second half)"
    run_local "$DEVICE"
else
    echo "run: local mode on the virtual audio rig (room roomA)"
    bash scripts/rig.sh run --dir "${INTERCOM_RIG_DIR:-$PWD/.rig}" --rooms roomA -- bash -c "$(declare -f run_local); SECONDS_TO_RUN=$SECONDS_TO_RUN; run_local roomA"
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
