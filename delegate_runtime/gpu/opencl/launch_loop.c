/* The hot path's launch loop in C (native_library.py builds it; hot_path.py calls it).
 *
 * It reaches OpenCL only through the two entry points the caller passes, so it builds
 * without OpenCL's headers or library. Types follow cl.h on Linux: cl_int is int32,
 * cl_uint uint32, CL_API_CALL the C convention. */
#include <stddef.h>
#include <stdint.h>

typedef int32_t (*enqueue_kernel_fn)(void *queue, void *kernel, uint32_t work_dim,
                                     const size_t *global_offset, const size_t *global_size,
                                     const size_t *local_size, uint32_t num_events,
                                     const void *wait_list, void *event);
typedef int32_t (*flush_fn)(void *queue);

/* Enqueue `count` launches in order, flushing after every `flush_every`-th (the first
 * included); launch i's sizes are global[3i..], local[3i..] (ignored unless has_local[i]).
 * Returns 0, or the failing call's status, its launch in *failed_at and in *in_flush
 * whether clFlush (not the enqueue) failed. */
int32_t enqueue_launches(enqueue_kernel_fn enqueue, flush_fn flush, void *queue, int32_t count,
                         void *const *kernels, const uint32_t *work_dims, const size_t *global,
                         const size_t *local, const uint8_t *has_local, int32_t flush_every,
                         int32_t *failed_at, int32_t *in_flush) {
  for (int32_t i = 0; i < count; ++i) {
    int32_t err = enqueue(queue, kernels[i], work_dims[i], NULL, global + 3 * (size_t)i,
                          has_local[i] ? local + 3 * (size_t)i : NULL, 0, NULL, NULL);
    *in_flush = 0;
    if (err == 0 && i % flush_every == 0) {
      err = flush(queue);
      *in_flush = 1;
    }
    if (err != 0) {
      *failed_at = i;
      return err;
    }
  }
  return 0;
}
