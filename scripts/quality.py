#!/usr/bin/env python3
"""Speech quality of a recording against its source: alignment, STOI, PESQ.

    .venv/bin/python scripts/quality.py REFERENCE.wav DEGRADED.wav [REFERENCE2.wav DEGRADED2.wav ...]
                                        [--reference-offset-ms MS] [--no-pesq]

REFERENCE is the clean clip that was played; DEGRADED is a recording (usually longer) that
contains it somewhere. The clip is found in the recording by cross-correlation (FFT, over every
lag at which the clip starts inside the recording). A receiver's jitter buffer may change its
delay mid-talk (it drops or inserts frames), after which one alignment fits only part of the
clip; so each 0.5 s piece of the clip is also aligned on its own (within 600 ms of the whole
clip's lag, on the band above 300 Hz, moving only where it fits clearly better; quiet pieces keep
the previous lag; a lone piece more than 30 ms from both its neighbours, which agree, matched the
wrong words and keeps the previous lag), the aligned pieces are put together, both are
resampled to 16 kHz, and one JSON object per pair is printed, one per line:

    lag_ms        where the whole clip best matches the recording
    delay_ms      lag_ms minus --reference-offset-ms (where the clip started in the player's own
                  timeline: its lead-in and buffering), so it is the path's delay
    delay_min_ms, delay_max_ms   the same for the pieces: how much the delay moved during the clip
    peak          normalised cross-correlation of the whole clip at lag_ms, 0..1 (1 = same waveform)
    stoi          Short-Time Objective Intelligibility (pystoi, Taal et al. 2011), 0..1, of the
                  piecewise-aligned recording: intelligibility, not the constancy of the delay
    stoi_fixed    STOI with the one whole-clip alignment (low when the delay moved mid-clip)
    pesq_wb       PESQ wide band (ITU-T P.862.2, MOS-LQO 1..4.5) of the piecewise-aligned
                  recording, or null (--no-pesq, or it failed)
    level_db      RMS level of the aligned recording, dBFS

Digital silence would make STOI undefined (0/0): the recording gets a seeded dither at
-100 dBFS, far below a 16-bit step, so a silent room measures as what it is, unintelligible.
Needs numpy, scipy, pystoi, pesq: scripts/setup.sh installs them into .venv.
"""
import argparse
import json
import sys

import numpy as np
from scipy.io import wavfile
from scipy.signal import fftconvolve, resample_poly

STOI_RATE = 16000
PIECE_S = 0.5          # pieces aligned on their own
SEARCH_MS = 600        # how far a piece may sit from the whole clip's lag
QUIET_DBFS = -45       # pieces quieter than this keep the previous piece's lag
ALIGN_ABOVE_HZ = 300   # pieces are aligned on this band and above (see above_hz)
MOVE_MARGIN = 0.05     # a piece takes its own lag only if it correlates this much better there
MISFIT_MS = 30         # a lone piece this far from both neighbours (which agree) is a misfit


def read_mono(path):
    rate, data = wavfile.read(path)
    x = data.astype(np.float64)
    if data.dtype == np.int16:
        x /= 32768.0
    elif data.dtype == np.int32:
        x /= 2147483648.0
    elif data.dtype == np.uint8:
        x = (x - 128.0) / 128.0
    if x.ndim == 2:
        x = x.mean(axis=1)
    return rate, x


def find_lag(ref, sig):
    """Lag k >= 0 maximising |sum ref[i] * sig[i + k]| with the whole clip inside sig (or, if
    sig is shorter, every partial overlap from k = 0); returns (lag, normalised peak)."""
    n = len(ref)
    corr = fftconvolve(sig, ref[::-1], mode="full")  # corr[n - 1 + k] = sum ref[i] sig[i + k]
    last = max(0, len(sig) - n)
    window = corr[n - 1:n - 1 + last + 1]
    k = int(np.argmax(np.abs(window)))
    seg = sig[k:k + n]
    r = ref[:len(seg)]
    denom = np.sqrt(np.dot(r, r) * np.dot(seg, seg))
    peak = float(abs(np.dot(r, seg)) / denom) if denom > 0 else 0.0
    return k, peak


def correlation_at(r, deg, at):
    """Normalised correlation of piece r with deg[at:at + len(r)] (0 where it does not fit)."""
    if at < 0 or at + len(r) > len(deg):
        return 0.0
    seg = deg[at:at + len(r)]
    denom = np.sqrt(np.dot(r, r) * np.dot(seg, seg))
    return float(abs(np.dot(r, seg)) / denom) if denom > 0 else 0.0


def above_hz(x, rate, hz=ALIGN_ABOVE_HZ):
    """x without its band below `hz`, for finding lags: a high-pass in the path (a DC notch)
    turns the phase of a voice's lowest harmonics, which moves a low-pitched piece's correlation
    peak by milliseconds although nothing was delayed."""
    from scipy.signal import butter, sosfiltfilt
    return sosfiltfilt(butter(4, hz, "highpass", fs=rate, output="sos"), x)


def piecewise(ref, deg, lag, rate, rng, ref_hp, deg_hp):
    """The recording re-aligned piece by piece to the clip (lags found above ALIGN_ABOVE_HZ, in
    ref_hp and deg_hp); returns (aligned, lags)."""
    piece, search = int(PIECE_S * rate), int(SEARCH_MS * rate / 1000)
    starts = list(range(0, len(ref), piece))
    chosen, counted = [], []
    current = lag
    for start in starts:
        r = ref[start:start + piece]
        found = False
        if 10 * np.log10(max(np.mean(r ** 2), 1e-20)) > QUIET_DBFS:
            rh = ref_hp[start:start + piece]
            lo = max(0, lag + start - search)
            hi = min(len(deg) - len(r), lag + start + search)
            if hi >= lo:
                k, peak = find_lag(rh, deg_hp[lo:hi + len(r)])
                # A piece moves only when the delay really moved: a filter's phase turns the
                # correlation's peak by a few samples at a near-equal height, and stitching pieces
                # at such lags cuts the waveform (PESQ then scores the cuts, not the filter).
                if peak >= 0.3 and peak > correlation_at(rh, deg_hp, current + start) + MOVE_MARGIN:
                    current = lo + k - start
                found = peak >= 0.3
        chosen.append(current)
        counted.append(found)
    # A lone piece far from both neighbours, which agree, matched a wrong stretch of speech: no
    # buffer moves the delay by several frames and back within a second without dropping or
    # inserting them (seen once: one half second at +253 ms, the pieces around it within 1 ms).
    far, near = int(MISFIT_MS * rate / 1000), int(0.002 * rate)
    for i in range(1, len(chosen) - 1):
        before, after = chosen[i - 1], chosen[i + 1]
        if abs(after - before) <= near and abs(chosen[i] - before) > far:
            chosen[i] = before
    aligned = np.empty(len(ref))
    for start, current in zip(starts, chosen):
        n = len(ref[start:start + piece])
        seg = deg[max(0, current + start):current + start + n]
        if len(seg) < n:
            seg = np.concatenate([seg, rng.standard_normal(n - len(seg)) * 1e-5])
        aligned[start:start + n] = seg
    return aligned, [c for c, f in zip(chosen, counted) if f]


def measure(reference, degraded, offset_ms, with_pesq, stoi):
    rate_r, ref = read_mono(reference)
    rate_d, deg = read_mono(degraded)
    if rate_r != rate_d:
        sys.exit(f"quality: sample rates differ: {rate_r} Hz and {rate_d} Hz")
    rng = np.random.default_rng(12345)
    deg = deg + rng.standard_normal(len(deg)) * 1e-5

    lag, peak = find_lag(ref, deg)
    fixed = deg[lag:lag + len(ref)]
    if len(fixed) < len(ref):  # the recording ended early: compare what is there, pad the rest
        fixed = np.concatenate([fixed, rng.standard_normal(len(ref) - len(fixed)) * 1e-5])
    aligned, lags = piecewise(ref, deg, lag, rate_r, rng, above_hz(ref, rate_r), above_hz(deg, rate_r))
    g = np.gcd(rate_r, STOI_RATE)
    def down(x):
        return resample_poly(x, STOI_RATE // g, rate_r // g)
    ref16, aligned16, fixed16 = down(ref), down(aligned), down(fixed)
    ms = 1000.0 / rate_r
    result = {
        "lag_ms": round(lag * ms, 2),
        "delay_ms": round(lag * ms - offset_ms, 2),
        "delay_min_ms": round(min(lags, default=lag) * ms - offset_ms, 2),
        "delay_max_ms": round(max(lags, default=lag) * ms - offset_ms, 2),
        "peak": round(peak, 4),
        "stoi": round(float(stoi(ref16, aligned16, STOI_RATE, extended=False)), 4),
        "stoi_fixed": round(float(stoi(ref16, fixed16, STOI_RATE, extended=False)), 4),
        "pesq_wb": None,
        "level_db": round(float(10 * np.log10(max(np.mean(aligned ** 2), 1e-20))), 1),
    }
    if with_pesq:
        try:
            from pesq import pesq
            result["pesq_wb"] = round(float(pesq(STOI_RATE, ref16, aligned16, "wb")), 3)
        except Exception as e:  # PESQ refuses e.g. a recording without any utterance
            result["pesq_error"] = str(e)
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+", metavar="REFERENCE DEGRADED", help="pairs of WAV files")
    p.add_argument("--reference-offset-ms", type=float, default=0.0,
                   help="where the clip starts in the player's own timeline; subtracted from lags")
    p.add_argument("--no-pesq", action="store_true", help="skip PESQ (STOI only)")
    a = p.parse_args()
    if len(a.files) % 2:
        p.error("give WAV files in pairs: REFERENCE DEGRADED [REFERENCE DEGRADED ...]")

    from pystoi import stoi

    for i in range(0, len(a.files), 2):
        print(json.dumps(measure(a.files[i], a.files[i + 1], a.reference_offset_ms, not a.no_pesq, stoi)), flush=True)


if __name__ == "__main__":
    main()
