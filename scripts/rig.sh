#!/usr/bin/env bash
# Virtual audio rig: a private PulseAudio with one null sink per simulated room,
# reached through ALSA's `pulse` PCM plugin. Programs use the real ALSA API and get
# real-time pacing on a machine without a sound card (snd-dummy/snd-aloop are not
# available, and ALSA's null/file plugins do not pace).
#
# Room model: a room's sink is its air. The room's ALSA device `pcm.<room>` plays
# into the sink (the room's loudspeaker) and captures the sink's monitor (the room's
# microphone), so whatever the speaker plays comes back as acoustic echo. A talker
# played into `pcm.<room>_air` (playback only) is the near-end voice.
#
# Usage: see usage() below, or `scripts/rig.sh help`.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd -P)
readonly SCRIPT_DIR REPO_ROOT
readonly DEFAULT_ROOMS=roomA,roomB,roomC,roomD,roomE
readonly RATE=48000
# Total time `up` may spend waiting for paced capture before it gives up.
readonly READY_TIMEOUT_S=${INTERCOM_RIG_READY_TIMEOUT:-20}
# A 1 s capture counts as paced when it takes this long (milliseconds).
readonly PACED_MIN_MS=900 PACED_MAX_MS=1300

log() { printf 'rig: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    cat <<'EOF'
Usage: scripts/rig.sh COMMAND [OPTIONS]

Commands:
  up     [--dir DIR] [--rooms A,B,..]   start the rig (idempotent); prints "rig ready: DIR"
  down   [--dir DIR]                    stop it (idempotent); keeps DIR and its logs
  run    [--dir DIR] [--rooms A,B,..] -- CMD [ARGS...]
                                        up, run CMD with the rig's environment, then down
                                        (also when CMD fails or on INT/TERM/HUP);
                                        exits with CMD's status
  env    [--dir DIR]                    print the client environment (eval "$(scripts/rig.sh env)")
  status [--dir DIR]                    say whether the rig runs; list its sinks (exit 1 if not running)
  couple   [--dir DIR] A B [--attenuation-db DB] [--delay-ms MS] [--one-way]
                                        neighbouring rooms: A's air leaks into B's and B's into A's
                                        (--one-way: only A's into B's), DB quieter (default 20) and
                                        MS later (default 10: one way the loopback's latency, exact;
                                        both ways a client per direction, to a few ms); replaces an
                                        earlier coupling of the two
  decouple [--dir DIR] A B              removes it (idempotent)

Defaults: DIR = $INTERCOM_RIG_DIR or <repo>/.rig; rooms = roomA,roomB,roomC,roomD,roomE.
ALSA devices per room R: "R" (playback = R's speaker, capture = R's microphone, which
hears R's air, i.e. the echo) and "R_air" (playback only, for test talkers).
Client environment (DIR/env): ALSA_CONFIG_PATH, PULSE_SERVER, PULSE_CLIENTCONFIG,
XDG_RUNTIME_DIR, INTERCOM_RIG_DIR, INTERCOM_RIG_ROOMS, INTERCOM_RIG_ASOUND_CONF
(DIR/asound.conf names the server itself, so snd_pcm_open_lconf() on it needs no env).
Notes: `up` with other rooms than the running rig restarts it. `run` stops the rig at
the end even if it was already running. On INT/TERM/HUP, `run` sends TERM to CMD.
INTERCOM_RIG_READY_TIMEOUT (seconds, default 20) bounds the wait for paced capture.
EOF
}

# ---------------------------------------------------------------- options / paths

RIG_DIR=${INTERCOM_RIG_DIR:-$REPO_ROOT/.rig}
ROOMS_CSV=$DEFAULT_ROOMS
ROOMS=()
CMD_ARGS=()

parse_opts() {
    local allow_rooms=$1 allow_cmd=$2
    shift 2
    while (($#)); do
        case $1 in
            --dir) (($# >= 2)) || die "--dir needs a value"; RIG_DIR=$2; shift 2 ;;
            --dir=*) RIG_DIR=${1#--dir=}; shift ;;
            --rooms | --rooms=*)
                [[ $allow_rooms == yes ]] || die "--rooms is not an option of this command"
                if [[ $1 == --rooms ]]; then
                    (($# >= 2)) || die "--rooms needs a value"; ROOMS_CSV=$2; shift 2
                else
                    ROOMS_CSV=${1#--rooms=}; shift
                fi ;;
            --)
                [[ $allow_cmd == yes ]] || die "unexpected '--'"
                shift; CMD_ARGS=("$@"); return 0 ;;
            -h | --help) usage; exit 0 ;;
            *) die "unknown argument '$1' (see: scripts/rig.sh help)" ;;
        esac
    done
    [[ $allow_cmd == no ]] || die "run needs '-- CMD [ARGS...]'"
}

parse_rooms() {
    local room
    local -A seen=()
    IFS=, read -r -a ROOMS <<<"$ROOMS_CSV"
    ((${#ROOMS[@]})) || die "--rooms is empty"
    for room in "${ROOMS[@]}"; do
        # Room names become ALSA config ids and PulseAudio sink names: keep them plain.
        [[ $room =~ ^[A-Za-z][A-Za-z0-9_]*$ ]] ||
            die "bad room name '$room' (letters, digits, '_', starting with a letter)"
        [[ -z ${seen[$room]:-} ]] || die "room '$room' given twice"
        [[ $room != *_air ]] || die "room '$room' must not end in _air (reserved for talker devices)"
        seen[$room]=1
    done
}

set_paths() {
    [[ -n $RIG_DIR ]] || die "empty --dir"
    # Absolute path even when DIR does not exist yet; the socket path is stored in configs.
    [[ $RIG_DIR == /* ]] || RIG_DIR=$PWD/$RIG_DIR
    RIG_DIR=${RIG_DIR%/}
    RUNTIME_DIR=$RIG_DIR/runtime
    SOCKET=$RUNTIME_DIR/native
    PA_SCRIPT=$RIG_DIR/rig.pa
    ASOUND_CONF=$RIG_DIR/asound.conf
    CLIENT_CONF=$RIG_DIR/client.conf
    ENV_FILE=$RIG_DIR/env
    PA_LOG=$RIG_DIR/pulseaudio.log
    PA_PID_FILE=$RIG_DIR/pulseaudio.pid
    LEAK_BIN=$RIG_DIR/rig-leak
    ALSA_PATH=/usr/share/alsa/alsa.conf:$ASOUND_CONF
    # sun_path holds 108 bytes including the NUL.
    ((${#SOCKET} < 108)) ||
        die "socket path '$SOCKET' is too long for a unix socket; use a shorter --dir"
}

# Environment for our own PulseAudio/ALSA clients (pactl, parec, arecord).
client() {
    env PULSE_SERVER="unix:$SOCKET" PULSE_CLIENTCONFIG="$CLIENT_CONF" \
        XDG_RUNTIME_DIR="$RUNTIME_DIR" ALSA_CONFIG_PATH="$ALSA_PATH" "$@"
}

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# ---------------------------------------------------------------- packages

ensure_packages() {
    local need=()
    command -v pulseaudio >/dev/null || need+=(pulseaudio)
    { command -v pactl && command -v parec; } >/dev/null || need+=(pulseaudio-utils)
    { command -v arecord && command -v aplay; } >/dev/null || need+=(alsa-utils)
    command -v sox >/dev/null || need+=(sox)
    command -v espeak-ng >/dev/null || need+=(espeak-ng)
    compgen -G '/usr/lib/*/alsa-lib/libasound_module_pcm_pulse.so' >/dev/null ||
        need+=(libasound2-plugins)
    ((${#need[@]})) || return 0
    ((EUID == 0)) || die "missing packages (${need[*]}); install them as root"
    log "installing ${need[*]} (apt-get)"
    apt-get update -qq >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2 ||
        die "apt-get install ${need[*]} failed"
}

# ---------------------------------------------------------------- processes

# Prints "KIND PID" for every live process of this rig, found through /proc so that
# a stale run (lost or outdated pid files, a deleted DIR) is still cleaned up and a
# recycled pid is never mistaken for ours. KIND is "pulseaudio", "parec:<room>" or
# "leak:<from>:<to>" (a wall's client, see couple).
rig_processes() {
    local p pid args a
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        args=()
        mapfile -d '' -t args 2>/dev/null <"$p/cmdline" || continue
        ((${#args[@]})) || continue # zombies and kernel threads
        case ${args[0]##*/} in
            pulseaudio)
                for a in "${args[@]}"; do
                    [[ $a == "$PA_SCRIPT" ]] && { echo "pulseaudio $pid"; break; }
                done ;;
            parec)
                local ours=no room=
                for a in "${args[@]}"; do
                    [[ $a == "--server=unix:$SOCKET" ]] && ours=yes
                    [[ $a == *.monitor ]] && room=${a%.monitor}
                done
                [[ $ours == no ]] || echo "parec:$room $pid" ;;
            rig-leak)
                [[ ${args[0]} == "$LEAK_BIN" ]] && echo "leak:${args[1]}:${args[2]} $pid" ;;
        esac
    done
}

pa_pid() { rig_processes | awk '$1 == "pulseaudio" { print $2; exit }'; }
parec_pid() { rig_processes | awk -v k="parec:$1" '$1 == k { print $2; exit }'; }

# A zombie counts as gone: our daemons are reparented to PID 1, which may reap late.
alive() {
    local stat
    read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

# TERM, then KILL whatever is still there after a grace period.
stop_pids() {
    local pid waited=0
    (($#)) || return 0
    kill -TERM "$@" 2>/dev/null || true
    while ((waited < 50)); do
        local left=0
        for pid in "$@"; do alive "$pid" && left=1; done
        ((left)) || return 0
        sleep 0.1
        waited=$((waited + 1))
    done
    log "still running after 5 s, killing: $*"
    kill -KILL "$@" 2>/dev/null || true
}

stop_rig() {
    local kind pid recorders=() servers=()
    while read -r kind pid; do
        if [[ $kind == pulseaudio ]]; then servers+=("$pid"); else recorders+=("$pid"); fi
    done < <(rig_processes)
    # Recorders first, so they do not log errors about the server going away.
    stop_pids "${recorders[@]}"
    # `pactl exit` is refused because of --disallow-exit (which keeps clients from
    # stopping a shared rig by accident), so stop the server by its pid.
    stop_pids "${servers[@]}"
    # Remove only runtime leftovers; configs and logs stay for inspection.
    rm -f "$SOCKET" "$RUNTIME_DIR/pulse/pid" "$RUNTIME_DIR/pulse/native" \
        "$PA_PID_FILE" "$RIG_DIR"/parec.*.pid
    (($# == 0)) || return 0
    if ((${#servers[@]} + ${#recorders[@]})); then
        log "stopped (pulseaudio: ${servers[*]:-none}; recorders: ${recorders[*]:-none})"
    else
        log "not running (nothing to stop)"
    fi
}

# ---------------------------------------------------------------- config files

write_atomic() { # FILE; content on stdin
    local tmp
    tmp=$(mktemp "$1.XXXXXX")
    cat >"$tmp"
    chmod 0644 "$tmp"
    mv -f "$tmp" "$1"
}

shell_quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

write_configs() {
    local room
    {
        echo "# Generated by scripts/rig.sh: the rig's private PulseAudio."
        echo "# Anonymous auth: the socket lives in a 0700 directory, so only its owner gets in."
        echo "load-module module-native-protocol-unix auth-anonymous=1 socket=$SOCKET"
        for room in "${ROOMS[@]}"; do
            echo "load-module module-null-sink sink_name=$room rate=$RATE channels=1 format=s16le norewinds=1 sink_properties=device.description=$room"
        done
    } | write_atomic "$PA_SCRIPT"

    {
        echo "# Generated by scripts/rig.sh. Use with"
        echo "#   ALSA_CONFIG_PATH=/usr/share/alsa/alsa.conf:$ASOUND_CONF"
        echo "# or snd_pcm_open_lconf(). The server is named here too, so the devices work"
        echo "# even without PULSE_SERVER in the environment."
        for room in "${ROOMS[@]}"; do
            cat <<EOF

# $room: speaker plays into the room's air; microphone hears the air (echo included).
pcm.$room {
    type asym
    playback.pcm { type pulse server "unix:$SOCKET" device "$room" }
    capture.pcm { type pulse server "unix:$SOCKET" device "$room.monitor" }
    hint { show on description "intercom rig room $room" }
}
# Talker into $room's air (near-end voice); playback only.
pcm.${room}_air {
    type asym
    playback.pcm { type pulse server "unix:$SOCKET" device "$room" }
    hint { show on description "intercom rig talker into $room" }
}
ctl.$room { type pulse server "unix:$SOCKET" sink "$room" source "$room.monitor" }
ctl.${room}_air { type pulse server "unix:$SOCKET" sink "$room" }
EOF
        done
    } | write_atomic "$ASOUND_CONF"

    # The rig stands in for sound cards, so it should behave like one:
    # - a room device that disappears must fail its streams (as an unplugged card does),
    #   not have them moved silently to another room's sink;
    # - the server's IO threads run SCHED_FIFO like a card's DMA, so a loaded CPU starves
    #   the process under test, not the simulated hardware.
    mkdir -p "$RIG_DIR/config/pulse"
    printf 'rescue-streams = no\nrealtime-scheduling = yes\nrealtime-priority = 80\nhigh-priority = yes\n' |
        write_atomic "$RIG_DIR/config/pulse/daemon.conf"

    # Never autospawn a default server when the rig is down: fail instead.
    printf 'autospawn = no\n' | write_atomic "$CLIENT_CONF"

    local rooms_csv
    rooms_csv=$(IFS=,; echo "${ROOMS[*]}")
    {
        echo "# Generated by scripts/rig.sh: environment for clients of the rig."
        echo "export ALSA_CONFIG_PATH=$(shell_quote "$ALSA_PATH")"
        echo "export PULSE_SERVER=$(shell_quote "unix:$SOCKET")"
        echo "export PULSE_CLIENTCONFIG=$(shell_quote "$CLIENT_CONF")"
        echo "export XDG_RUNTIME_DIR=$(shell_quote "$RUNTIME_DIR")"
        echo "export INTERCOM_RIG_DIR=$(shell_quote "$RIG_DIR")"
        echo "export INTERCOM_RIG_ROOMS=$(shell_quote "$rooms_csv")"
        echo "export INTERCOM_RIG_ASOUND_CONF=$(shell_quote "$ASOUND_CONF")"
    } | write_atomic "$ENV_FILE"
}

# ---------------------------------------------------------------- start / check

start_pulseaudio() {
    [[ ! -e $PA_LOG ]] || mv -f "$PA_LOG" "$PA_LOG.old"
    mkdir -p "$RIG_DIR/config/pulse" "$RIG_DIR/state"
    # A cookie of its own (unused with anonymous auth) spares the log four warnings.
    [[ -s $RIG_DIR/config/pulse/cookie ]] ||
        (umask 077 && head -c 256 /dev/urandom >"$RIG_DIR/config/pulse/cookie")
    # As root without dbus/systemd: private runtime, config and state directories so
    # nothing of a user's PulseAudio is read or touched; no default.pa (-n), only rig.pa.
    # Shared memory off: the monitor path otherwise logs a harmless memfd error
    # (PulseAudio issue 824) per stream, and a killed server leaves no /dev/shm files.
    if ! (cd "$RIG_DIR" && env -u DBUS_SESSION_BUS_ADDRESS -u DISPLAY -u PULSE_SERVER \
        XDG_RUNTIME_DIR="$RUNTIME_DIR" XDG_CONFIG_HOME="$RIG_DIR/config" \
        PULSE_CONFIG="$RIG_DIR/config/pulse/daemon.conf" PULSE_STATE_PATH="$RIG_DIR/state" \
        pulseaudio --daemonize=yes --system=no --exit-idle-time=-1 --disallow-exit \
        --disable-shm=yes --use-pid-file=yes --log-time=yes \
        --log-target="file:$PA_LOG" -n -F "$PA_SCRIPT" </dev/null >&2 9>&-); then
        log "pulseaudio failed to start; end of $PA_LOG:"
        tail -n 20 "$PA_LOG" >&2 2>/dev/null || log "(no log written)"
        return 1
    fi
    local i pid=
    for ((i = 0; i < 50; i++)); do
        pid=$(pa_pid)
        [[ -n $pid && -S $SOCKET ]] && client pactl info >/dev/null 2>&1 && break
        pid=
        sleep 0.1
    done
    if [[ -z $pid ]]; then
        log "pulseaudio did not answer on $SOCKET within 5 s; end of $PA_LOG:"
        tail -n 20 "$PA_LOG" >&2 2>/dev/null || true
        return 1
    fi
    echo "$pid" >"$PA_PID_FILE"
    if grep -q '^\(([^)]*) \)\?E:' "$PA_LOG" 2>/dev/null; then
        log "pulseaudio logged errors at start:"
        grep '^\(([^)]*) \)\?E:' "$PA_LOG" | head -n 20 >&2
        return 1
    fi
}

# One low-latency recorder per sink: an idle null sink sleeps, and the first
# read/write of a new stream then stalls 1-2 s. A running recorder keeps it awake.
#
# It also keeps the room's clock exact. A null sink renders one block (the lowest latency its
# clients ask for) per wake-up and advances its clock by each rendered chunk's length truncated to
# whole microseconds. Chunks end where a block ends or a client's write does, so unless the block
# divides the clients' writes (a terminal's 10 ms periods) into whole 125 us (6 frames at 48 kHz),
# the room runs fast: 151 ppm at the 3333 us a 10 ms loopback asks for, 120-450 ppm at 3 ms with a
# terminal playing. The recorder asks for less than every other client: 10 ms, or in a room coupled
# one way the largest of 5, 2 and 1 ms below a third of the loopback's delay (its request). A room
# coupled both ways has no loopback (see couple): its recorder stays at 10 ms.
recorder_ms() {
    client pactl list short modules 2>/dev/null | awk -v room="$1" '
        $2 == "module-loopback" {
            line = " " $0 " "; gsub(/\t/, " ", line)
            from = index(line, " source=" room ".monitor ") > 0
            into = index(line, " sink=" room " ") > 0
            if (!from && !into) next
            froms += from; intos += into
            for (i = 3; i <= NF; i++)
                if ($i ~ /^latency_msec=/ && (low == "" || substr($i, 14) + 0 < low)) low = substr($i, 14) + 0
        }
        END {
            if (low == "" || (froms && intos) || low / 3 >= 10) print 10
            else if (low > 15) print 5
            else if (low > 6) print 2
            else print 1
        }'
}

start_recorder() { # ROOM
    # setsid: the recorders outlive `up` and must not get the terminal's Ctrl-C.
    env PULSE_CLIENTCONFIG="$CLIENT_CONF" XDG_RUNTIME_DIR="$RUNTIME_DIR" \
        setsid parec "--server=unix:$SOCKET" -d "$1.monitor" \
        "--latency-msec=$(recorder_ms "$1")" --rate=$RATE --channels=1 --format=s16le \
        </dev/null >/dev/null 2>>"$RIG_DIR/parec.$1.log" 9>&- &
}

start_recorders() {
    local room pid started=0
    for room in "${ROOMS[@]}"; do
        [[ -z $(parec_pid "$room") ]] || continue
        start_recorder "$room"
        started=1
    done
    ((started == 0)) || sleep 0.3
    # Pid files from /proc (what really runs), for people and other tools.
    for room in "${ROOMS[@]}"; do
        pid=$(parec_pid "$room")
        if [[ -z $pid ]]; then
            log "recorder for $room is not running; see $RIG_DIR/parec.$room.log"
            return 1
        fi
        echo "$pid" >"$RIG_DIR/parec.$room.pid"
    done
}

sinks_match() {
    local sinks want
    sinks=$(client pactl list short sinks 2>/dev/null | awk '{ print $2 }' | sort) || return 1
    want=$(printf '%s\n' "${ROOMS[@]}" | sort)
    [[ $sinks == "$want" ]]
}

# Times one ALSA capture of FRAMES frames per room, all rooms at once.
# Prints "ROOM MS" per room, MS being "fail" when arecord failed or hung.
time_captures() {
    local frames=$1 room jobs=()
    shift
    for room; do
        (
            t0=$(now_ms)
            if client timeout 5 arecord -q -D "$room" -t raw -f S16_LE -r $RATE -c 1 \
                -s "$frames" /dev/null 2>>"$RIG_DIR/pacing.log"; then
                echo $(($(now_ms) - t0))
            else
                echo fail
            fi >"$RIG_DIR/pacing.$room"
        ) &
        jobs+=($!)
    done
    wait "${jobs[@]}"
    for room; do
        printf '%s %s\n' "$room" "$(cat "$RIG_DIR/pacing.$room")"
        rm -f "$RIG_DIR/pacing.$room"
    done
}

# Waits until a 1 s capture takes about 1 s in every room.
wait_paced() {
    local start deadline room ms attempt=0 pending=("${ROOMS[@]}") still paced=()
    start=$(now_ms)
    deadline=$((start + READY_TIMEOUT_S * 1000))
    # Warm-up with a 0.1 s capture: a null sink that had no stream works in blocks of
    # up to 2 s, and a new stream waits for the current block to end. That first-use
    # stall (up to ~2 s after the server starts) would spoil the first 1 s probe.
    while read -r room ms; do
        [[ $ms != fail ]] || log "warm-up capture on $room failed (see $RIG_DIR/pacing.log)"
    done < <(time_captures $((RATE / 10)) "${ROOMS[@]}")
    log "first-use warm-up took $(($(now_ms) - start)) ms"
    while ((${#pending[@]})); do
        attempt=$((attempt + 1))
        still=()
        while read -r room ms; do
            if [[ $ms == fail ]] || ((ms < PACED_MIN_MS || ms > PACED_MAX_MS)); then
                still+=("$room")
                log "attempt $attempt: 1 s capture on $room took $ms ms, not paced yet"
            else
                paced+=("$room=${ms}ms")
            fi
        done < <(time_captures "$RATE" "${pending[@]}")
        pending=("${still[@]}")
        ((${#pending[@]})) || break
        if (($(now_ms) > deadline)); then
            log "capture not paced after ${READY_TIMEOUT_S} s: ${pending[*]} (see $RIG_DIR/pacing.log)"
            return 1
        fi
        sleep 0.2
    done
    log "capture paced (1 s capture: ${paced[*]}; ready after $(($(now_ms) - start)) ms)"
    warm_duplex
}

# The first full-duplex client of a fresh sink still meets a start-up transient: its capture
# stream collects a backlog of ~100-200 ms while playback starves silently, which a program
# under test would see as extra delay and an echo path that is not a fixed delay. One short
# duplex run per room (all rooms at once) absorbs it, so "ready" means ready for duplex use.
warm_duplex() {
    local room pids=()
    for room in "${ROOMS[@]}"; do
        client arecord -q -D "$room" -f S16_LE -r "$RATE" -c 1 -d 1 /dev/null 9>&- &
        pids+=($!)
        client aplay -q -D "$room" -f S16_LE -r "$RATE" -c 1 -d 1 /dev/zero 9>&- &
        pids+=($!)
    done
    wait "${pids[@]}" 2>/dev/null || log "duplex warm-up: a client failed (harmless if the rig reports ready)"
}

# ---------------------------------------------------------------- commands

lock_dir() {
    # One rig command at a time per DIR (parallel `up`s would start two servers).
    exec 9>"$RIG_DIR/.lock"
    flock -w 60 9 || die "another rig command holds $RIG_DIR/.lock"
}
unlock_dir() { exec 9>&-; }

# Starts (or confirms) the rig; the caller holds the lock.
do_up() {
    local t0 pid
    t0=$(now_ms)
    ensure_packages
    mkdir -p "$RIG_DIR"
    chmod 0700 "$RIG_DIR"
    pid=$(pa_pid)
    if [[ -n $pid ]] && [[ -f $ENV_FILE ]] && sinks_match; then
        # Already running with these rooms: repair recorders, re-check the pacing.
        log "already running (pulseaudio pid $pid)"
        if start_recorders && wait_paced; then
            return 0
        fi
        log "running rig is not healthy; restarting it"
    elif [[ -n $pid ]]; then
        log "running rig has other rooms or is broken; restarting it"
    fi
    # Clean up whatever a killed run left behind (processes, socket, pid files).
    stop_rig quiet
    mkdir -p "$RUNTIME_DIR"
    chmod 0700 "$RUNTIME_DIR"
    write_configs
    if ! start_pulseaudio || ! start_recorders || ! wait_paced; then
        stop_rig quiet
        die "rig did not get ready; logs: $PA_LOG, $RIG_DIR/pacing.log"
    fi
    log "up in $(($(now_ms) - t0)) ms"
}

cmd_up() {
    parse_opts yes no "$@"
    parse_rooms
    set_paths
    mkdir -p "$RIG_DIR"
    lock_dir
    do_up
    echo "rig ready: $RIG_DIR"
}

cmd_down() {
    parse_opts no no "$@"
    set_paths
    # Works on a deleted DIR too: processes are found by their command lines.
    if [[ -d $RIG_DIR ]]; then lock_dir; fi
    stop_rig
}

cmd_env() {
    parse_opts no no "$@"
    set_paths
    [[ -f $ENV_FILE ]] || die "no $ENV_FILE; run: scripts/rig.sh up"
    cat "$ENV_FILE"
}

cmd_status() {
    parse_opts no no "$@"
    set_paths
    local pid kind
    pid=$(pa_pid)
    if [[ -z $pid ]]; then
        echo "rig not running ($RIG_DIR)"
        return 1
    fi
    echo "rig running: $RIG_DIR (pulseaudio pid $pid, socket $SOCKET)"
    echo "sinks:"
    client pactl list short sinks | sed 's/^/  /'
    echo "recorders:"
    rig_processes | while read -r kind pid; do
        [[ $kind == pulseaudio ]] || echo "  ${kind#parec:} pid $pid"
    done
}

# ---------------------------------------------------------------- neighbouring rooms

# A wall or an open door between two rooms: each room's air (its sink's monitor) is played into
# the other's, quieter and later. One way, by a PulseAudio loopback, whose own latency is the
# delay. Both ways, by a client per direction (scripts/rig-leak.c, built here on first use): two
# loopbacks coupling two null sinks both ways spun PulseAudio 16 on an AMD EPYC machine (memory
# pool full, "q overrun", the rooms' recordings stopped after 2-7 s, at any latency); the client
# reaches the delay to a few milliseconds only. RigCouplingTests measures what each really does.
COUPLE_ROOMS=()
COUPLE_ONE_WAY=0
COUPLE_DB=20
COUPLE_MS=10

parse_couple() {
    while (($#)); do
        case $1 in
            --dir) (($# >= 2)) || die "--dir needs a value"; RIG_DIR=$2; shift 2 ;;
            --dir=*) RIG_DIR=${1#--dir=}; shift ;;
            --attenuation-db) (($# >= 2)) || die "--attenuation-db needs a value"; COUPLE_DB=$2; shift 2 ;;
            --delay-ms) (($# >= 2)) || die "--delay-ms needs a value"; COUPLE_MS=$2; shift 2 ;;
            --one-way) COUPLE_ONE_WAY=1; shift ;;
            -*) die "unknown option '$1' (see: scripts/rig.sh help)" ;;
            *) COUPLE_ROOMS+=("$1"); shift ;;
        esac
    done
    ((${#COUPLE_ROOMS[@]} == 2)) || die "couple and decouple need two rooms"
    [[ ${COUPLE_ROOMS[0]} != "${COUPLE_ROOMS[1]}" ]] || die "a room cannot be coupled to itself"
    [[ $COUPLE_DB =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--attenuation-db must be a non-negative number of dB, not '$COUPLE_DB'"
    [[ $COUPLE_MS =~ ^[0-9]+$ ]] && ((COUPLE_MS >= 1 && COUPLE_MS <= 2000)) ||
        die "--delay-ms must be a whole number of milliseconds in 1...2000, not '$COUPLE_MS'"
    set_paths
    [[ -n $(pa_pid) ]] || die "the rig is not running ($RIG_DIR); run: scripts/rig.sh up"
    local room
    for room in "${COUPLE_ROOMS[@]}"; do
        client pactl list short sinks | awk -v r="$room" '$2 == r { found = 1 } END { exit !found }' ||
            die "no room '$room' in the rig"
    done
}

# Module indexes of the loopbacks from $1's air into $2's.
leak_modules() {
    client pactl list short modules |
        awk -v src="source=$1.monitor" -v snk="sink=$2" \
            '$2 == "module-loopback" && index($0 " ", src " ") && index($0 " ", snk " ") { print $1 }'
}

remove_leaks() {
    local module pids
    for module in $(leak_modules "$1" "$2"); do client pactl unload-module "$module"; done
    pids=$(rig_processes | awk -v k="leak:$1:$2" '$1 == k { print $2 }')
    [[ -z $pids ]] || stop_pids $pids
}

# Both ways: one client per direction, with its output volume applied by the client itself.
add_leak_client() {
    local from=$1 to=$2
    if [[ ! -x $LEAK_BIN || $REPO_ROOT/scripts/rig-leak.c -nt $LEAK_BIN ]]; then
        cc -O2 -Wall -o "$LEAK_BIN.tmp" "$REPO_ROOT/scripts/rig-leak.c" -lasound -lm ||
            die "building scripts/rig-leak.c failed (needs gcc and libasound2-dev: scripts/setup.sh)"
        mv -f "$LEAK_BIN.tmp" "$LEAK_BIN"
    fi
    env ALSA_CONFIG_PATH="$ALSA_PATH" setsid "$LEAK_BIN" "$from" "$to" "$COUPLE_DB" "$COUPLE_MS" "$RIG_DIR/leak.$from.$to.count" \
        </dev/null >/dev/null 2>>"$RIG_DIR/leak.$from.$to.log" 9>&- &
    log "coupled: $from's air into $to's, -$COUPLE_DB dB, about $COUPLE_MS ms (client pid $!)"
}

add_leak() {
    local from=$1 to=$2 module input
    module=$(client pactl load-module module-loopback "source=$from.monitor" "sink=$to" \
        "latency_msec=$COUPLE_MS" adjust_time=0 source_dont_move=true sink_dont_move=true) ||
        die "loading the loopback $from -> $to failed"
    input=$(client pactl list sink-inputs |
        awk -v m="$module" '/^Sink Input #/ { id = substr($3, 2) } /Owner Module: / && $3 == m { print id; exit }')
    if [[ -z $input ]] || ! client pactl set-sink-input-volume "$input" "-${COUPLE_DB}dB" >/dev/null; then
        client pactl unload-module "$module"
        die "the loopback $from -> $to has no sink input whose volume could be set"
    fi
    log "coupled: $from's air into $to's, -$COUPLE_DB dB, $COUPLE_MS ms (module $module)"
}

# After a coupling changed: each room's recorder asks for what recorder_ms says now. The new
# recorder starts before the old one stops, so the sink never sleeps.
retune_recorders() {
    local room old pid
    for room in "$@"; do
        old=$(parec_pid "$room")
        if [[ -n $old ]] && tr '\0' '\n' <"/proc/$old/cmdline" 2>/dev/null |
            grep -qx -- "--latency-msec=$(recorder_ms "$room")"; then
            continue
        fi
        start_recorder "$room"
        sleep 0.3
        [[ -z $old ]] || stop_pids "$old"
        pid=$(parec_pid "$room")
        [[ -n $pid ]] || die "recorder for $room is not running; see $RIG_DIR/parec.$room.log"
        echo "$pid" >"$RIG_DIR/parec.$room.pid"
    done
}

cmd_couple() {
    parse_couple "$@"
    local a=${COUPLE_ROOMS[0]} b=${COUPLE_ROOMS[1]}
    remove_leaks "$a" "$b"; remove_leaks "$b" "$a"
    if ((COUPLE_ONE_WAY)); then
        add_leak "$a" "$b"
        retune_recorders "$a" "$b"
    else
        # The clients measure their delay once, on the rooms' blocks as they will stay.
        retune_recorders "$a" "$b"
        add_leak_client "$a" "$b"
        add_leak_client "$b" "$a"
        sleep 1  # each client settles its delay half a second after it starts
    fi
}

cmd_decouple() {
    parse_couple "$@"
    local a=${COUPLE_ROOMS[0]} b=${COUPLE_ROOMS[1]}
    remove_leaks "$a" "$b"; remove_leaks "$b" "$a"
    retune_recorders "$a" "$b"
    log "decoupled: $a and $b"
}

CHILD_PID=

on_run_exit() {
    local status=$?
    trap - EXIT INT TERM HUP
    if [[ -d $RIG_DIR && -w $RIG_DIR ]]; then
        exec 9>"$RIG_DIR/.lock"
        flock -w 10 9 || true
    fi
    stop_rig quiet || true
    log "stopped"
    exit "$status"
}

on_run_signal() {
    local sig=$1 code=$2
    log "got SIG$sig, stopping"
    if [[ -n $CHILD_PID ]] && alive "$CHILD_PID"; then
        # The command runs in the background (see cmd_run), where bash leaves SIGINT
        # ignored, so forward TERM whatever the signal was.
        kill -TERM "$CHILD_PID" 2>/dev/null || true
        wait "$CHILD_PID" 2>/dev/null || true
    fi
    exit "$code"
}

cmd_run() {
    parse_opts yes yes "$@"
    parse_rooms
    set_paths
    ((${#CMD_ARGS[@]})) || die "run needs a command after '--'"
    mkdir -p "$RIG_DIR"
    trap on_run_exit EXIT
    trap 'on_run_signal INT 130' INT
    trap 'on_run_signal TERM 143' TERM
    trap 'on_run_signal HUP 129' HUP
    lock_dir
    do_up
    # Release the lock: CMD may call `rig.sh status` or `env` itself.
    unlock_dir
    echo "rig ready: $RIG_DIR" >&2 # stdout belongs to CMD
    log "running: ${CMD_ARGS[*]}"
    # shellcheck source=/dev/null
    source "$ENV_FILE"
    # In the background with `wait`, so a TERM/INT to this script is handled at once
    # (bash defers traps while a foreground child runs). stdin is passed explicitly:
    # bash would give a background command /dev/null.
    local status=0
    "${CMD_ARGS[@]}" 0<&0 &
    CHILD_PID=$!
    wait "$CHILD_PID" || status=$?
    CHILD_PID=
    exit "$status"
}

main() {
    (($#)) || { usage >&2; exit 2; }
    local cmd=$1
    shift
    case $cmd in
        up) cmd_up "$@" ;;
        down) cmd_down "$@" ;;
        run) cmd_run "$@" ;;
        env) cmd_env "$@" ;;
        status) cmd_status "$@" ;;
        couple) cmd_couple "$@" ;;
        decouple) cmd_decouple "$@" ;;
        help | -h | --help) usage ;;
        *) usage >&2; die "unknown command '$cmd'" ;;
    esac
}

main "$@"
