#!/usr/bin/env bash
# Self-test of the virtual audio rig (scripts/rig.sh): real-time pacing through the
# real ALSA API, full duplex, the acoustic echo path, room isolation, the talker
# device, clean teardown, idempotent up/down, recovery from a killed rig, and `run`
# passing on exit status and signals.
#
# Uses a rig directory of its own under /tmp, so a developer's running rig (.rig) is
# never touched. Prints PASS/FAIL per check and a closing "N passed, N failed" line;
# exits non-zero when any check failed. Takes about 35 s.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
readonly RIG=$SCRIPT_DIR/rig.sh SELF=$SCRIPT_DIR/rig-selftest.sh

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
say() { printf '%s\n' "$*" >&2; }

# RESULTS is set by both halves; each check appends "PASS|FAIL: text" to it.
pass() { printf 'PASS: %s\n' "$*" | tee -a "$RESULTS"; }
fail() { printf 'FAIL: %s\n' "$*" | tee -a "$RESULTS"; }
check() { # OK TEXT: pass when OK is 0 (written as `ok=1; COND && ok=0` for set -e)
    if (($1 == 0)); then pass "$2"; else fail "$2"; fi
}
within() { (($1 >= $2 && $1 <= $3)); } # VALUE MIN MAX

# RMS amplitude of a WAV file (0..1), from sox's stat.
rms() { sox "$1" -n stat 2>&1 | awk '/^RMS +amplitude/ { print $3 }'; }
# Float comparison: gt A B.
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# ------------------------------------------------------------ inside the rig

# Runs under `rig.sh run`, with the rig's environment exported.
inside() {
    local work=$1 t0 ms ms_rec ms_play status ok
    cd "$work"
    say "rig env: INTERCOM_RIG_DIR=$INTERCOM_RIG_DIR INTERCOM_RIG_ROOMS=$INTERCOM_RIG_ROOMS"

    # (1) Capture is paced: 2 s of audio takes about 2 s.
    t0=$(now_ms)
    status=0
    arecord -q -D roomA -f S16_LE -r 48000 -c 1 -d 2 rec1.wav 2>err1.txt || status=$?
    ms=$(($(now_ms) - t0))
    ok=1
    within "$ms" 1900 2600 && ((status == 0)) && ok=0
    check $ok "(1) 2 s arecord on roomA took $ms ms (want 1900-2600, paced)"

    # (2) Full duplex: aplay and arecord on roomA at once, 3 s each, both paced.
    sox -n -r 48000 -c 1 -b 16 quiet3.wav synth 3 sine 440 vol 0.05
    t0=$(now_ms)
    (
        arecord -D roomA -f S16_LE -r 48000 -c 1 -d 3 rec2.wav 2>err2r.txt || true
        echo $(($(now_ms) - t0)) >ms2r.txt
    ) &
    local rec_job=$!
    status=0
    aplay -D roomA quiet3.wav 2>err2p.txt || status=$?
    ms_play=$(($(now_ms) - t0))
    wait "$rec_job" || status=$?
    ms_rec=$(cat ms2r.txt)
    local xr
    xr="overruns $(grep -c 'overrun' err2r.txt || true), underruns $(grep -c 'underrun' err2p.txt || true)"
    ok=1
    within "$ms_play" 2900 3700 && within "$ms_rec" 2900 3700 && ((status == 0)) && ok=0
    check $ok "(2) full duplex on roomA: aplay 3 s took $ms_play ms, arecord 3 s took $ms_rec ms ($xr)"

    # (3) Echo path and isolation: a 1 kHz tone played into roomA is heard by roomA's
    # microphone; roomB's microphone, recording at the same time, hears silence.
    sox -n -r 48000 -c 1 -b 16 tone.wav synth 2 sine 1000 vol 0.5
    arecord -q -D roomA -f S16_LE -r 48000 -c 1 -d 3 recA.wav 2>err3a.txt &
    local ja=$!
    arecord -q -D roomB -f S16_LE -r 48000 -c 1 -d 3 recB.wav 2>err3b.txt &
    local jb=$!
    sleep 0.3
    status=0
    aplay -q -D roomA tone.wav 2>err3p.txt || status=$?
    wait "$ja" || status=$?
    wait "$jb" || status=$?
    local rms_a rms_b freq_a
    rms_a=$(rms recA.wav)
    rms_b=$(rms recB.wav)
    freq_a=$(sox recA.wav -n stat 2>&1 | awk '/^Rough +frequency/ { print $3 }')
    ok=1
    ((status == 0)) && gt "$rms_a" 0.1 && ! gt "$rms_b" 0.001 && ok=0
    check $ok "(3) echo path: roomA mic RMS $rms_a (want > 0.1, rough freq $freq_a Hz); roomB mic RMS $rms_b (want < 0.001, isolated)"

    # (3b) Talker device: roomB_air plays into roomB's air (heard by roomB's mic, not
    # by roomA's) and refuses capture.
    arecord -q -D roomB -f S16_LE -r 48000 -c 1 -d 3 recB2.wav 2>err3c.txt &
    jb=$!
    arecord -q -D roomA -f S16_LE -r 48000 -c 1 -d 3 recA2.wav 2>err3d.txt &
    ja=$!
    sleep 0.3
    status=0
    aplay -q -D roomB_air tone.wav 2>err3e.txt || status=$?
    wait "$jb" || status=$?
    wait "$ja" || status=$?
    local rms_b2 rms_a2 air_capture=refused
    rms_b2=$(rms recB2.wav)
    rms_a2=$(rms recA2.wav)
    if arecord -q -D roomB_air -f S16_LE -r 48000 -c 1 -s 480 /dev/null 2>/dev/null; then
        air_capture=allowed
    fi
    ok=1
    ((status == 0)) && gt "$rms_b2" 0.1 && ! gt "$rms_a2" 0.001 && [[ $air_capture == refused ]] && ok=0
    check $ok "(3b) talker roomB_air: roomB mic RMS $rms_b2, roomA mic RMS $rms_a2, capture on roomB_air $air_capture"
}

# ------------------------------------------------------------ around the rig

# Pids of pulseaudio/parec processes whose command line names the rig directory.
rig_procs() {
    local p args a out=()
    for p in /proc/[0-9]*; do
        args=()
        mapfile -d '' -t args 2>/dev/null <"$p/cmdline" || continue
        ((${#args[@]})) || continue
        case ${args[0]##*/} in pulseaudio | parec) ;; *) continue ;; esac
        for a in "${args[@]}"; do
            if [[ $a == *"$1"* ]]; then out+=("${p#/proc/}"); break; fi
        done
    done
    echo "${out[*]}"
}
rig_pa_pid() { "$RIG" status --dir "$1" 2>/dev/null | sed -n 's/.*pulseaudio pid \([0-9]*\).*/\1/p'; }

main() {
    local work rig status t0 ms left ok
    work=$(mktemp -d /tmp/rig-selftest.XXXXXX)
    rig=$work/rig
    RESULTS=$work/results
    export RESULTS
    : >"$RESULTS"
    say "self-test work dir: $work"

    # (1)-(3b) inside one `rig.sh run`.
    t0=$(now_ms)
    status=0
    "$RIG" run --dir "$rig" -- "$SELF" --inside "$work" || status=$?
    ms=$(($(now_ms) - t0))
    ok=1
    ((status == 0)) && ok=0
    check $ok "rig.sh run (up, checks, down) exited $status after $ms ms"

    # (4) After down, no pulseaudio/parec of the rig remains; socket gone.
    left=$(rig_procs "$rig")
    ok=1
    [[ -z $left && ! -e $rig/runtime/native ]] && ok=0
    check $ok "(4) after run: rig processes left: '${left}', socket present: $([[ -e $rig/runtime/native ]] && echo yes || echo no)"

    # (5) up twice (second is a no-op on the same server), down twice.
    local pid1 pid2 ms1 ms2
    t0=$(now_ms)
    "$RIG" up --dir "$rig" --rooms roomA,roomB >/dev/null 2>"$work/up1.txt" || true
    ms1=$(($(now_ms) - t0))
    pid1=$(rig_pa_pid "$rig")
    t0=$(now_ms)
    "$RIG" up --dir "$rig" --rooms roomA,roomB >/dev/null 2>"$work/up2.txt" || true
    ms2=$(($(now_ms) - t0))
    pid2=$(rig_pa_pid "$rig")
    status=0
    "$RIG" down --dir "$rig" 2>/dev/null || status=$?
    "$RIG" down --dir "$rig" 2>/dev/null || status=$?
    left=$(rig_procs "$rig")
    ok=1
    [[ -n $pid1 && $pid1 == "$pid2" && -z $left ]] && ((status == 0)) && ok=0
    check $ok "(5) up twice: ${ms1} ms then ${ms2} ms, same server (pid '$pid1' / '$pid2'); down twice ok; left: '$left'"

    # (6) A killed rig (SIGKILL to server and a recorder) does not break the next up.
    "$RIG" up --dir "$rig" --rooms roomA,roomB >/dev/null 2>&1 || true
    pid1=$(rig_pa_pid "$rig")
    # shellcheck disable=SC2046 # word splitting of the pid list is wanted
    kill -KILL $(rig_procs "$rig") 2>/dev/null || true
    sleep 0.3
    status=0
    "$RIG" up --dir "$rig" --rooms roomA,roomB >/dev/null 2>"$work/up3.txt" || status=$?
    pid2=$(rig_pa_pid "$rig")
    "$RIG" down --dir "$rig" 2>/dev/null || status=$?
    left=$(rig_procs "$rig")
    ok=1
    [[ -n $pid2 && $pid1 != "$pid2" && -z $left ]] && ((status == 0)) && ok=0
    check $ok "(6) up after SIGKILL of the rig: new server (pid '$pid1' -> '$pid2'), down ok, left: '$left'"

    # (7) run passes on the command's exit status and tears down.
    status=0
    "$RIG" run --dir "$rig" --rooms roomA -- sh -c 'exit 7' 2>/dev/null || status=$?
    left=$(rig_procs "$rig")
    ok=1
    ((status == 7)) && [[ -z $left ]] && ok=0
    check $ok "(7) run -- sh -c 'exit 7' exited $status (want 7); left: '$left'"

    # (8) TERM to `run` stops the command at once and tears down.
    "$RIG" run --dir "$rig" --rooms roomA -- sleep 60 2>/dev/null &
    local run_pid=$!
    local i
    for ((i = 0; i < 100; i++)); do
        [[ -n $(rig_procs "$rig") ]] && pgrep -P "$run_pid" -x sleep >/dev/null && break
        sleep 0.1
    done
    t0=$(now_ms)
    kill -TERM "$run_pid"
    status=0
    wait "$run_pid" || status=$?
    ms=$(($(now_ms) - t0))
    left=$(rig_procs "$rig")
    ok=1
    ((status == 143 && ms < 8000)) && [[ -z $left ]] && ok=0
    check $ok "(8) TERM to run: exited $status (want 143) after $ms ms; left: '$left'"

    local passed failed
    passed=$(grep -c '^PASS' "$RESULTS" || true)
    failed=$(grep -c '^FAIL' "$RESULTS" || true)
    if ((failed == 0)); then
        rm -rf "$work"
    else
        say "kept $work for inspection (rig logs in $rig)"
    fi
    echo "rig-selftest: $passed passed, $failed failed"
    ((failed == 0))
}

if [[ ${1:-} == --inside ]]; then
    RESULTS=${RESULTS:?}
    inside "$2"
else
    main "$@"
fi
