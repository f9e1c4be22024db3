// Emulates a host that takes a virtual core away now and then, as CI machines do: a thread at
// SCHED_FIFO 99, pinned to one core at a time (alternating), spins for MIN..MAX ms, then sleeps
// about EVERY ms. Everything on that core below priority 99 (the daemons' audio threads, the
// sound server) stops meanwhile, which is what MachineStalls reports as proof of a spoiled run.
// Usage: host-stalls SECONDS [EVERY_MS MIN_MS MAX_MS]; prints how many stalls it made.
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stopping = 0;
static void stop(int sig) { (void)sig; stopping = 1; }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 60;
    int every = argc > 2 ? atoi(argv[2]) : 250, lo = argc > 3 ? atoi(argv[3]) : 15, hi = argc > 4 ? atoi(argv[4]) : 60;
    if (seconds <= 0 || every <= 0 || lo <= 0 || hi < lo) { fprintf(stderr, "usage: host-stalls SECONDS [EVERY_MS MIN_MS MAX_MS]\n"); return 2; }
    struct sched_param p = { .sched_priority = 99 };
    if (sched_setscheduler(0, SCHED_FIFO, &p) != 0) { perror("host-stalls: SCHED_FIFO (needs root)"); return 1; }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    signal(SIGINT, stop);
    signal(SIGTERM, stop);
    srand(7);
    int core = 0, count = 0;
    double end = now() + seconds, total = 0;
    while (!stopping && now() < end) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(core, &set);
        sched_setaffinity(0, sizeof set, &set);
        double ms = lo + rand() % (hi - lo + 1), until = now() + ms / 1000;
        while (now() < until) {}
        count++, total += ms;
        core = (core + 1) % (int)cores;
        usleep((useconds_t)(every * 1000 * (0.8 + 0.4 * rand() / RAND_MAX)));
    }
    printf("host-stalls: %d stalls, %.0f ms in all, over %.0f s\n", count, total, seconds - (end - now()));
    return 0;
}
