/* An input's copy into the host memory the GPU reads, shared with helper threads
 * (native_library.py builds it beside the launch loop; host_copy.py calls it).
 *
 * One core copies a 224x224x3 float input at about 28 GB/s; the copy is on the invoke's
 * critical path, before the launch. The caller and up to MAX_HELPERS helper threads claim
 * chunks of the copy; the caller never waits for a helper to start, only for the chunks a
 * helper has claimed, so a helper that sleeps, or a forked child without helpers, leaves
 * the copy to the caller alone. A helper spins for `spin_us` after each copy (a stream of
 * invokes keeps it awake, as OpenMP's runtimes keep theirs), then sleeps on a futex.
 */
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>  // _mm_pause
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

#define MAX_HELPERS 15

typedef struct {
  /* (job << 32) | next chunk: claims are checked against the job they belong to */
  _Atomic uint64_t ticket;
  _Atomic uint32_t job;                   /* bumped per copy */
  _Atomic uint32_t asleep[MAX_HELPERS];   /* helper i's futex word: 1 while it sleeps */
  _Atomic uint32_t finished; /* chunks of the current job done */
  _Atomic(char *) dst;
  _Atomic(const char *) src;
  _Atomic size_t size, chunk;
  _Atomic uint32_t chunks, spin_us;
  _Atomic int32_t helpers; /* started */
  _Atomic int32_t taking;  /* helpers 0..taking-1 take part in the current copy */
} copy_state;

static copy_state state;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t caller_lock = PTHREAD_MUTEX_INITIALIZER; /* one copy in flight */

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Claim and copy chunks of job `job` until none is left; returns the chunks copied. */
static uint32_t copy_chunks(uint32_t job) {
  uint32_t copied = 0;
  for (;;) {
    uint64_t t = atomic_load_explicit(&state.ticket, memory_order_acquire);
    if ((uint32_t)(t >> 32) != job) return copied;
    uint32_t i = (uint32_t)t;
    if (i >= atomic_load_explicit(&state.chunks, memory_order_relaxed)) return copied;
    if (!atomic_compare_exchange_weak_explicit(&state.ticket, &t, t + 1, memory_order_acq_rel,
                                               memory_order_relaxed))
      continue;
    /* the job cannot end before this chunk is finished, so its fields stay as read */
    size_t chunk = atomic_load_explicit(&state.chunk, memory_order_relaxed);
    size_t size = atomic_load_explicit(&state.size, memory_order_relaxed);
    size_t at = (size_t)i * chunk;
    size_t n = at + chunk > size ? size - at : chunk;
    char *dst = atomic_load_explicit(&state.dst, memory_order_relaxed) + at;
    const char *src = atomic_load_explicit(&state.src, memory_order_relaxed) + at;
    memcpy(dst, src, n);
    atomic_fetch_add_explicit(&state.finished, 1, memory_order_release);
    ++copied;
  }
}

static void *helper_main(void *arg) {
  int32_t index = (int32_t)(intptr_t)arg;
  uint32_t seen = atomic_load_explicit(&state.job, memory_order_acquire);
  for (;;) {
    uint64_t until = now_us() + atomic_load_explicit(&state.spin_us, memory_order_relaxed);
    uint32_t job;
    unsigned spins = 0;
    while ((job = atomic_load_explicit(&state.job, memory_order_acquire)) == seen) {
      CPU_RELAX();
      /* a helper the last copy did not take sleeps at once: it would spin for nothing */
      int idle = index >= atomic_load_explicit(&state.taking, memory_order_relaxed);
      if (idle || ((++spins & 255) == 0 && now_us() > until)) {
        /* Dekker with the caller: it bumps `job`, then clears `asleep` and wakes */
        atomic_store_explicit(&state.asleep[index], 1, memory_order_seq_cst);
        if (atomic_load_explicit(&state.job, memory_order_seq_cst) == seen)
          syscall(SYS_futex, &state.asleep[index], FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
        atomic_store_explicit(&state.asleep[index], 0, memory_order_seq_cst);
        until = now_us() + atomic_load_explicit(&state.spin_us, memory_order_relaxed);
      }
    }
    seen = job;
    if (index < atomic_load_explicit(&state.taking, memory_order_relaxed)) copy_chunks(job);
  }
  return NULL;
}

static void start_helpers(int32_t want) {
  pthread_mutex_lock(&start_lock);
  while (atomic_load(&state.helpers) < want) {
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    intptr_t index = atomic_load(&state.helpers);
    int failed = pthread_create(&thread, &attr, helper_main, (void *)index);
    pthread_attr_destroy(&attr);
    if (failed) break; /* fewer helpers: the caller copies more itself */
    atomic_fetch_add(&state.helpers, 1);
  }
  pthread_mutex_unlock(&start_lock);
}

/* host_copy's copy with the helpers, the caller holding caller_lock. */
static uint32_t shared_copy(char *dst, const char *src, size_t size, size_t chunk,
                            int32_t helpers, uint32_t spin_us) {
  if (helpers > MAX_HELPERS) helpers = MAX_HELPERS;
  if (helpers < 0) helpers = 0;
  if (helpers > 0 && atomic_load_explicit(&state.helpers, memory_order_relaxed) < helpers)
    start_helpers(helpers);
  if (chunk == 0) chunk = size ? size : 1;
  uint32_t chunks = (uint32_t)((size + chunk - 1) / chunk);
  uint32_t job = atomic_load_explicit(&state.job, memory_order_relaxed) + 1;
  atomic_store_explicit(&state.dst, dst, memory_order_relaxed);
  atomic_store_explicit(&state.src, src, memory_order_relaxed);
  atomic_store_explicit(&state.size, size, memory_order_relaxed);
  atomic_store_explicit(&state.chunk, chunk, memory_order_relaxed);
  atomic_store_explicit(&state.chunks, chunks, memory_order_relaxed);
  atomic_store_explicit(&state.spin_us, spin_us, memory_order_relaxed);
  atomic_store_explicit(&state.finished, 0, memory_order_relaxed);
  atomic_store_explicit(&state.taking, helpers, memory_order_relaxed);
  atomic_store_explicit(&state.ticket, (uint64_t)job << 32, memory_order_release);
  atomic_store_explicit(&state.job, job, memory_order_seq_cst);
  for (int32_t i = 0; i < helpers; ++i)
    if (atomic_load_explicit(&state.asleep[i], memory_order_seq_cst) &&
        atomic_exchange_explicit(&state.asleep[i], 0, memory_order_seq_cst))
      syscall(SYS_futex, &state.asleep[i], FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  uint32_t mine = copy_chunks(job);
  while (atomic_load_explicit(&state.finished, memory_order_acquire) < chunks) CPU_RELAX();
  return mine;
}

/* Copy `size` bytes from `src` to `dst` with up to `helpers` helper threads, in chunks of
 * `chunk` bytes; helpers spin `spin_us` after it.
 * Returns the chunks the caller copied itself; a caller that finds another's copy in
 * flight (sessions invoked from several threads) copies alone. */
uint32_t host_copy(char *dst, const char *src, size_t size, size_t chunk, int32_t helpers,
                   uint32_t spin_us) {
  if (pthread_mutex_trylock(&caller_lock) != 0) {
    memcpy(dst, src, size);
    return 1;
  }
  uint32_t mine = shared_copy(dst, src, size, chunk, helpers, spin_us);
  pthread_mutex_unlock(&caller_lock);
  return mine;
}
