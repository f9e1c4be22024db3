#!/usr/bin/env python3
"""A talker in one room and an ear in another, on one clock: mouth-to-ear delay by wall clock.

    .venv/bin/python scripts/talk_listen.py --mouth roomA_air --ear roomB --clip source.wav --out ear.wav

Plays CLIP (48 kHz mono WAV) after a short lead-in into the ALSA playback device MOUTH and records
the ALSA capture device EAR to OUT, in one loop (real ALSA through ctypes, non-blocking, polled every
0.5 ms). The clip's first frame is stamped with the monotonic clock and with what is queued ahead
of it in the playback buffer; every read is stamped with the clock and with what is captured but
not read yet. So the time the clip's first sample left the player and the time it reached the
recorder are both known; their difference is the delay of whatever lies between the devices (on
the rig: room A's air -> A's intercomd -> network -> B's intercomd -> B's speaker, plus the rig's
own ~1 ms per pass; a rig room's own loop measures -2..+1 ms). Counting stream positions instead
would be off by the sound server's stream start-up, which varies in steps of 10 ms (and
snd_pcm_delay of ALSA's pulse plugin was 5-7 ms off here).

Prints one JSON object: mouth_to_ear_ms (at the start of the clip), peak (correlation of the
clip's first second in the recording), lag_ms (where the clip starts in OUT).
"""
import argparse
import ctypes
import json
import sys
import time

import numpy as np
from scipy.io import wavfile
from scipy.signal import fftconvolve

RATE = 48000
FRAME = 480  # 10 ms
PLAYBACK, CAPTURE = 0, 1
FORMAT_S16_LE, ACCESS_RW_INTERLEAVED = 2, 3
EAGAIN = 11

asound = ctypes.CDLL("libasound.so.2")
_pcm, _ptr, _long = ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long
asound.snd_pcm_open.argtypes = [ctypes.POINTER(_pcm), ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
asound.snd_pcm_set_params.argtypes = [_pcm, ctypes.c_int, ctypes.c_int, ctypes.c_uint, ctypes.c_uint, ctypes.c_int, ctypes.c_uint]
asound.snd_pcm_nonblock.argtypes = [_pcm, ctypes.c_int]
asound.snd_pcm_start.argtypes = [_pcm]
asound.snd_pcm_close.argtypes = [_pcm]
asound.snd_pcm_recover.argtypes = [_pcm, ctypes.c_int, ctypes.c_int]
asound.snd_pcm_writei.argtypes = [_pcm, _ptr, ctypes.c_ulong]
asound.snd_pcm_writei.restype = _long
asound.snd_pcm_readi.argtypes = [_pcm, _ptr, ctypes.c_ulong]
asound.snd_pcm_readi.restype = _long
asound.snd_pcm_avail_update.argtypes = [_pcm]
asound.snd_pcm_avail_update.restype = _long
asound.snd_pcm_get_params.argtypes = [_pcm, ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.c_ulong)]
asound.snd_strerror.argtypes = [ctypes.c_int]
asound.snd_strerror.restype = ctypes.c_char_p


def check(rc, what):
    if rc < 0:
        sys.exit(f"talk_listen: {what}: {asound.snd_strerror(rc).decode()}")
    return rc


def open_pcm(name, stream, latency_us):
    pcm = ctypes.c_void_p()
    check(asound.snd_pcm_open(ctypes.byref(pcm), name.encode(), stream, 0), f"open {name}")
    check(asound.snd_pcm_set_params(pcm, FORMAT_S16_LE, ACCESS_RW_INTERLEAVED, 1, RATE, 0, latency_us),
          f"configure {name} (48 kHz mono S16)")
    check(asound.snd_pcm_nonblock(pcm, 1), f"non-blocking {name}")
    return pcm


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mouth", required=True, help="ALSA playback device the talker speaks into")
    p.add_argument("--ear", required=True, help="ALSA capture device that hears the far room")
    p.add_argument("--clip", required=True, help="48 kHz mono WAV")
    p.add_argument("--out", required=True, help="WAV file for the recording")
    p.add_argument("--lead-in", type=float, default=0.3, help="silence before the clip, s")
    p.add_argument("--tail", type=float, default=1.5, help="recording after the clip, s")
    a = p.parse_args()

    rate, clip = wavfile.read(a.clip)
    if rate != RATE or clip.ndim != 1 or clip.dtype != np.int16:
        sys.exit("talk_listen: the clip must be 48 kHz mono 16-bit")
    lead = int(a.lead_in * RATE) // FRAME * FRAME
    signal = np.concatenate([np.zeros(lead, np.int16), clip])
    signal = np.concatenate([signal, np.zeros((-len(signal)) % FRAME, np.int16)])

    play = open_pcm(a.mouth, PLAYBACK, 30000)
    cap = open_pcm(a.ear, CAPTURE, 30000)
    silence = np.zeros(FRAME, np.int16)
    buf = np.zeros(FRAME, np.int16)
    chunks, read_at, read_avail = [], [], []
    bs, ps = ctypes.c_ulong(), ctypes.c_ulong()
    check(asound.snd_pcm_get_params(play, ctypes.byref(bs), ctypes.byref(ps)), "buffer size")
    play_buffer = bs.value
    position = 0
    clip_written_at = clip_queue = None
    check(asound.snd_pcm_start(cap), "start capture")
    end = time.monotonic_ns() + int((a.lead_in + len(clip) / RATE + a.tail) * 1e9)
    while time.monotonic_ns() < end:
        avail = asound.snd_pcm_avail_update(play)
        if avail < 0:
            asound.snd_pcm_recover(play, int(avail), 1)
            continue
        while avail >= FRAME:
            frame = signal[position:position + FRAME] if position < len(signal) else silence
            if position == lead:  # the clip's first frame: what is queued ahead of it, and when
                clip_queue = play_buffer - avail
                clip_written_at = time.monotonic_ns()
            n = asound.snd_pcm_writei(play, frame.ctypes.data, FRAME)
            if n < 0:
                asound.snd_pcm_recover(play, int(n), 1)
                break
            position += FRAME
            avail -= FRAME
        while True:
            n = asound.snd_pcm_readi(cap, buf.ctypes.data, FRAME)
            if n == -EAGAIN:
                break
            if n < 0:
                asound.snd_pcm_recover(cap, int(n), 1)
                asound.snd_pcm_start(cap)
                break
            read_at.append(time.monotonic_ns())
            read_avail.append(max(0, asound.snd_pcm_avail_update(cap)))  # captured, not yet read
            chunks.append(buf[:n].copy())
        time.sleep(0.0005)
    asound.snd_pcm_close(play)
    asound.snd_pcm_close(cap)

    recording = np.concatenate(chunks) if chunks else np.zeros(0, np.int16)
    wavfile.write(a.out, RATE, recording)
    ends = np.cumsum([len(c) for c in chunks])  # recording position after each read
    # The clip's first second (speech onset) in the recording.
    ref = clip[:RATE].astype(np.float64)
    rec = recording.astype(np.float64) + np.random.default_rng(1).standard_normal(len(recording)) * 0.3
    result = {"mouth_to_ear_ms": None, "peak": 0.0, "lag_ms": None}
    if len(rec) > len(ref) and clip_written_at is not None:
        corr = fftconvolve(rec, ref[::-1], mode="valid")
        lag = int(np.argmax(np.abs(corr)))
        seg = rec[lag:lag + len(ref)]
        peak = float(abs(np.dot(ref, seg)) / np.sqrt(np.dot(ref, ref) * np.dot(seg, seg)))
        k = int(np.searchsorted(ends, lag, side="right"))  # the read that delivered sample `lag`
        if k < len(ends):
            played = clip_written_at + clip_queue * 1e9 / RATE
            captured = read_at[k] - (ends[k] - lag + read_avail[k]) * 1e9 / RATE
            result = {"mouth_to_ear_ms": round((captured - played) / 1e6, 1), "peak": round(peak, 3),
                      "lag_ms": round(lag * 1000 / RATE, 2)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
