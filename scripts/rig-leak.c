/* One wall of the virtual audio rig: room FROM's air leaks into room TO's, GAIN_DB quieter and
 * DELAY_MS later. `scripts/rig.sh couple` compiles it and starts one per direction of a wall
 * that leaks both ways.
 *
 * Why a client and not PulseAudio's module-loopback, as one way: two loopbacks that couple two
 * null sinks both ways form a cycle of the sinks' IO threads, and on an AMD EPYC machine
 * PulseAudio 16 then spun (its memory pool full, "q overrun", every recording of those rooms
 * stopped after 2-7 s, whatever the loopbacks' latency). Clients break the cycle.
 *
 * It reads FROM's microphone (ALSA PCM "FROM", the sink's monitor) in 2 ms periods and plays each
 * period into TO's air (ALSA PCM "TO_air") as it comes, so the leak keeps its waveform: no sample
 * is dropped or repeated (both rooms run on the sound server's one clock). The two streams hold
 * about STREAMS_MS between them, so DELAY_MS less that of silence goes first, and a playback
 * buffer only two periods longer keeps a start from queueing more. The server still lets capture
 * back up behind a full playback stream (each start or underrun of the playback adds its wait to
 * the delay): 767 frames waiting were seen, and leaks of up to 63 ms for 10. So a backlog of more
 * than four periods that stays for 100 ms is read away down to one period; the waveform breaks
 * only there, and the count goes to the log at exit. Measured for 10 ms, both ways at once, 14
 * starts (with two periods and 50 ms): 7.0-13.4 ms (a mean of the two legs), 0-6 trims in 9 s; on
 * 2026-11-29 the same machine kind trimmed 11-46 times in 9 s, hence the wider bound.
 * RigCouplingTests measures it.
 * With COUNT_FILE, every break of the waveform (a trim, a playback underrun, a capture overrun)
 * is counted there as it happens ("trims underruns overruns"), so that a test can tell a leak
 * the machine held up from one the rig made as it should.
 */
#include <alsa/asoundlib.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#define RATE 48000
#define PERIOD 96 /* 2 ms: whole microseconds, so the sinks' clocks advance exactly */
#define STREAMS_MS 5
#define BACKLOG_MAX (4 * PERIOD)
#define BACKLOG_READS 50 /* 100 ms */

static volatile sig_atomic_t stop;
static const char *count_file;
static long trims, underruns, overruns;

/* Rewrites COUNT_FILE (rarely: only when a count changes). */
static void write_counts(void) {
    if (!count_file) return;
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp", count_file);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "%ld %ld %ld\n", trims, underruns, overruns);
    fclose(f);
    rename(tmp, count_file);
}
static void on_signal(int sig) { (void)sig; stop = 1; }

static snd_pcm_t *open_pcm(const char *name, snd_pcm_stream_t dir, unsigned periods) {
    snd_pcm_t *pcm;
    int rc = snd_pcm_open(&pcm, name, dir, 0);
    if (rc == 0)
        rc = snd_pcm_set_params(pcm, SND_PCM_FORMAT_S16_LE, SND_PCM_ACCESS_RW_INTERLEAVED, 1, RATE, 0,
                                (unsigned)(1e6 * PERIOD * periods / RATE));
    if (rc < 0) {
        fprintf(stderr, "rig-leak: %s: %s\n", name, snd_strerror(rc));
        exit(1);
    }
    return pcm;
}

/* Writes n frames (silence when samples is NULL); recovers from an underrun. */
static void play(snd_pcm_t *air, const short *samples, long n) {
    static const short silence[PERIOD];
    while (n > 0 && !stop) {
        long chunk = samples ? n : (n < PERIOD ? n : PERIOD);
        snd_pcm_sframes_t w = snd_pcm_writei(air, samples ? samples : silence, (snd_pcm_uframes_t)chunk);
        if (w < 0) {
            if (snd_pcm_recover(air, (int)w, 1) < 0) return;
            if (samples) { underruns++; write_counts(); }
            continue;
        }
        n -= w;
        if (samples) samples += w;
    }
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: rig-leak FROM TO GAIN_DB DELAY_MS [COUNT_FILE] (ALSA PCMs FROM and TO_air)\n");
        return 2;
    }
    if (argc == 6) count_file = argv[5];
    char to_air[256];
    snprintf(to_air, sizeof to_air, "%s_air", argv[2]);
    const float gain = powf(10.0f, -fabsf((float)atof(argv[3])) / 20.0f);
    const long target = lround(atof(argv[4]) * RATE / 1000.0);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);

    const long prefill = target > STREAMS_MS * RATE / 1000 ? target - STREAMS_MS * RATE / 1000 : 0;
    snd_pcm_t *mic = open_pcm(argv[1], SND_PCM_STREAM_CAPTURE, 8);
    snd_pcm_t *air = open_pcm(to_air, SND_PCM_STREAM_PLAYBACK, (unsigned)(prefill / PERIOD + 3));
    /* Playback starts with its first frame: the delay is the silence, not a start threshold. */
    snd_pcm_sw_params_t *sw;
    snd_pcm_sw_params_alloca(&sw);
    snd_pcm_sw_params_current(air, sw);
    snd_pcm_sw_params_set_start_threshold(air, sw, 1);
    snd_pcm_sw_params(air, sw);

    short block[PERIOD], surplus[8 * PERIOD];
    long backlogged = 0, trimmed = 0;
    write_counts();
    play(air, NULL, prefill);
    snd_pcm_start(mic);
    while (!stop) {
        snd_pcm_sframes_t got = snd_pcm_readi(mic, block, PERIOD);
        if (got < 0) {
            if (snd_pcm_recover(mic, (int)got, 1) < 0) break;
            overruns++;
            write_counts();
            snd_pcm_start(mic);
            continue;
        }
        for (long i = 0; i < got; i++) block[i] = (short)lrintf(block[i] * gain);
        play(air, block, got);
        snd_pcm_sframes_t waiting = snd_pcm_avail(mic);
        backlogged = waiting > BACKLOG_MAX ? backlogged + 1 : 0;
        if (backlogged >= BACKLOG_READS) {
            long n = waiting - PERIOD < 8 * PERIOD ? waiting - PERIOD : 8 * PERIOD;
            snd_pcm_sframes_t r = snd_pcm_readi(mic, surplus, (snd_pcm_uframes_t)n);
            if (r > 0) { trims++; trimmed += r; write_counts(); }
            backlogged = 0;
        }
    }
    fprintf(stderr, "rig-leak %s -> %s: %ld trims of the capture backlog, %ld frames\n", argv[1], argv[2], trims, trimmed);
    snd_pcm_close(mic);
    snd_pcm_close(air);
    return 0;
}
