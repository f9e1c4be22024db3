#ifndef ALLOC_COUNTER_H
#define ALLOC_COUNTER_H
#include <stdint.h>

// Counts heap allocations made by threads that opted in, while the counter is armed.
// Linked only into tests and benchmarks: it replaces malloc & co. for the whole process
// and forwards every call to glibc's own allocator.

/// Marks the calling thread as one whose allocations are counted (e.g. the audio thread).
void alloc_counter_track_current_thread(void);
/// Starts (1) or stops (0) counting.
void alloc_counter_arm(int armed);
/// Allocations counted so far on tracked threads while armed.
uint64_t alloc_counter_count(void);
/// Bytes requested by those allocations.
uint64_t alloc_counter_bytes(void);
void alloc_counter_reset(void);
/// Return addresses of the first counted allocations (at most 64), for finding who allocates.
int alloc_counter_callers(void **out, int max);
/// "library: symbol+offset" for a code address.
void alloc_counter_describe(const void *address, char *out, int size);
/// 1 when this process really routes malloc through the counter.
int alloc_counter_is_active(void);
#endif
