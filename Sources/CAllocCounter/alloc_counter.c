// glibc exports its allocator as __libc_*; forwarding there avoids dlsym, which itself allocates.
// Defining malloc in the executable interposes it for every shared library (ELF symbol lookup
// order), so allocations from the Swift runtime, Foundation and C libraries are all seen.
#define _GNU_SOURCE
#include "alloc_counter.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <stddef.h>
#include <stdatomic.h>
#include <errno.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static _Atomic int armed;
static _Atomic uint64_t count;
static _Atomic uint64_t bytes;
static _Atomic int active;
static __thread int tracked;
#define CALLER_SAMPLES 64
static void *callers[CALLER_SAMPLES];
static _Atomic int caller_count;

// Inlined into each entry point so that __builtin_return_address(0) is the allocating caller.
#define NOTE(size) do { \
    atomic_store_explicit(&active, 1, memory_order_relaxed); \
    if (tracked && atomic_load_explicit(&armed, memory_order_relaxed)) { \
        atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); \
        atomic_fetch_add_explicit(&bytes, (size), memory_order_relaxed); \
        int slot = atomic_fetch_add_explicit(&caller_count, 1, memory_order_relaxed); \
        if (slot < CALLER_SAMPLES) callers[slot] = __builtin_return_address(0); \
    } \
} while (0)

void *malloc(size_t size) { NOTE(size); return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { NOTE(n * size); return __libc_calloc(n, size); }
void *realloc(void *p, size_t size) { NOTE(size); return __libc_realloc(p, size); }
void *memalign(size_t align, size_t size) { NOTE(size); return __libc_memalign(align, size); }
void *aligned_alloc(size_t align, size_t size) { NOTE(size); return __libc_memalign(align, size); }
int posix_memalign(void **out, size_t align, size_t size) {
    NOTE(size);
    if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
    void *p = __libc_memalign(align, size);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

void alloc_counter_track_current_thread(void) { tracked = 1; }
void alloc_counter_arm(int on) { atomic_store(&armed, on); }
uint64_t alloc_counter_count(void) { return atomic_load(&count); }
uint64_t alloc_counter_bytes(void) { return atomic_load(&bytes); }
void alloc_counter_reset(void) { atomic_store(&count, 0); atomic_store(&bytes, 0); atomic_store(&caller_count, 0); }
int alloc_counter_callers(void **out, int max) {
    int n = atomic_load(&caller_count);
    if (n > CALLER_SAMPLES) n = CALLER_SAMPLES;
    if (n > max) n = max;
    for (int i = 0; i < n; i++) out[i] = callers[i];
    return n;
}
int alloc_counter_is_active(void) { void *p = malloc(1); extern void free(void *); free(p); return atomic_load(&active); }

void alloc_counter_describe(const void *address, char *out, int size) {
    Dl_info info;
    if (dladdr(address, &info) == 0) { snprintf(out, size, "%p", address); return; }
    const char *lib = info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
    snprintf(out, size, "%s: %s+0x%lx", lib ? lib + 1 : "?", info.dli_sname ? info.dli_sname : "?",
             (unsigned long)((const char *)address - (const char *)(info.dli_saddr ? info.dli_saddr : info.dli_fbase)));
}
