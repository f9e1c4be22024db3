// Test-only, LD_PRELOADed into intercomd: every fsync waits FSYNC_DELAY_MS more before it runs,
// as on a terminal's slow flash card. Lets a test slow the history file's writes through the
// daemon's real write path without a hook in the product.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include "fsync_delay.h"

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    const char *text = getenv("FSYNC_DELAY_MS");
    long ms = text ? atol(text) : 0;
    if (ms > 0) {
        struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&left, &left) != 0 && errno == EINTR) {}
    }
    return real ? real(fd) : (errno = ENOSYS, -1);
}
