/*===- loom_program.h - The contract between compiled code and the runtime -===*
 *
 * A compiled Loom artifact (`loom-compile -o model.loom`) is a directory:
 *
 *   model.loom/program.so     the compiled functions (this header's ABI)
 *   model.loom/plan.json      what the runtime needs to call them: the grid,
 *                             each function's arguments and results (role,
 *                             name, dtype, local and global shape, which
 *                             grid axes split which dimension), the
 *                             workspace size of the static memory plan, the
 *                             communicator groups the code uses
 *   model.loom/schedule.json  the per-rank instruction streams of a
 *                             pipelined step (without it, each step calls
 *                             `train_step` once)
 *
 * Every compiled function `@f` of the per-device program is exported as
 *
 *   int32_t loom_fn_<f>(const loom_call_frame *frame);
 *
 * It reads its arguments from `frame->args`, writes its results into
 * `frame->results` (buffers the caller allocated at the sizes plan.json
 * gives), keeps every intermediate value inside `frame->workspace` at the
 * offsets of its static memory plan, and reaches the other ranks only
 * through `frame->comm`. It returns 0, or the first non-zero status a
 * communication callback returned (it stops at once; results are then
 * undefined). Compiled code never allocates, never prints and never exits.
 *
 * Buffers are dense, row-major, at the local (per-device) shape, 64-byte
 * aligned. Collectives act within a communicator group: `group` indexes
 * plan.json's `groups`, each a list of grid axes; the members of a group
 * are the devices that share every coordinate outside those axes, ordered
 * by the row-major index of their coordinates on the group's axes (the
 * order of `shard` collectives, see the compiler's Interpreter/MultiRank.h).
 * The runtime's collectives move contiguous blocks in member order; the
 * compiled code packs and unpacks tensor dimensions around them.
 *
 *===----------------------------------------------------------------------===*/

#ifndef LOOM_PROGRAM_H
#define LOOM_PROGRAM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What failed: every fallible call of the runtime (loom_runtime.h) and
 * every communication callback returns one of these, set by the layer
 * that failed. A callback returns LOOM_ERROR_COMMUNICATION; compiled code
 * passes its status on unchanged. */
typedef enum loom_status_code {
  LOOM_OK = 0,
  LOOM_ERROR_INVALID_ARGUMENT = 1, /* a bad key, shape, rank or option */
  LOOM_ERROR_ARTIFACT = 2,         /* a missing or malformed artifact */
  LOOM_ERROR_KERNEL = 3,        /* a kernel, CUDA or cuBLAS failed (e.g. a bad
                                   token id) */
  LOOM_ERROR_COMMUNICATION = 4, /* MPI or NCCL failed, a peer is gone, or
                                   the watchdog gave up waiting */
  LOOM_ERROR_OUT_OF_MEMORY = 5, /* an allocation of the backend failed */
  LOOM_ERROR_UNAVAILABLE = 6,   /* the backend's driver library is missing */
} loom_status_code;

/* Element types of buffers handed to communication callbacks. */
typedef enum loom_dtype {
  LOOM_DTYPE_F32 = 0,
  LOOM_DTYPE_F64 = 1,
  LOOM_DTYPE_I32 = 2,
  LOOM_DTYPE_I64 = 3,
  LOOM_DTYPE_BF16 = 4,
} loom_dtype;

/* Bytes per element of `dtype`. */
static inline int64_t loom_dtype_bytes(loom_dtype dtype) {
  switch (dtype) {
  case LOOM_DTYPE_F64:
  case LOOM_DTYPE_I64:
    return 8;
  case LOOM_DTYPE_BF16:
    return 2;
  default:
    return 4;
  }
}

typedef enum loom_reduction {
  LOOM_REDUCE_SUM = 0,
  LOOM_REDUCE_MAX = 1,
  LOOM_REDUCE_MIN = 2,
} loom_reduction;

/* Communication the runtime provides to compiled code. Every callback
 * returns 0 or a non-zero status (the runtime records the message); `count`
 * is in elements. `ctx` is `loom_comm.ctx`. */
typedef struct loom_comm {
  void *ctx;
  /* In place: every member ends with the reduction of all members' `buf`. */
  int32_t (*all_reduce)(void *ctx, int32_t group, void *buf, int64_t count,
                        loom_dtype dtype, loom_reduction op);
  /* `recv` (count * members elements) receives every member's `send`
   * (count elements) in member order. */
  int32_t (*all_gather)(void *ctx, int32_t group, const void *send, void *recv,
                        int64_t count, loom_dtype dtype);
  /* `send` holds members blocks of `count` elements; member i receives
   * the reduction of every member's block i in `recv`. */
  int32_t (*reduce_scatter)(void *ctx, int32_t group, const void *send,
                            void *recv, int64_t count, loom_dtype dtype,
                            loom_reduction op);
  /* `send` holds members blocks of `count` elements; block j goes to
   * member j, and `recv` block i comes from member i. */
  int32_t (*all_to_all)(void *ctx, int32_t group, const void *send, void *recv,
                        int64_t count, loom_dtype dtype);
  /* Point to point between pipeline stages: `peer` is a world rank and
   * `tag` (0..32767) tells transfers apart; a recv matches the sends of
   * its peer and tag in their order. A send never waits for its recv: it
   * returns once `buf` may be reused (the backend keeps a copy until the
   * peer takes it), so a schedule's sends cannot deadlock each other. */
  int32_t (*send)(void *ctx, int32_t peer, int32_t tag, const void *buf,
                  int64_t count, loom_dtype dtype);
  int32_t (*recv)(void *ctx, int32_t peer, int32_t tag, void *buf,
                  int64_t count, loom_dtype dtype);
  /* This rank's coordinate on grid axis `axis` (dropout masks are drawn at
   * global indices). */
  int64_t (*grid_coordinate)(void *ctx, int32_t axis);
  /* Split collectives (ABI 2): compiled code starts a transfer where the
   * schedule puts the collective and waits for it just before the first
   * instruction that reads its result, so that the compute in between
   * overlaps it. A start is the blocking callback's transfer, begun under
   * `slot` (>= 0, with nothing in flight under it) and left in flight:
   * until wait(slot) returns, the caller neither writes `buf` / `send` nor
   * reads or writes `recv`. wait(slot) returns the transfer's status once
   * it has finished; on a device backend, once work the caller enqueues
   * after it is ordered after the transfer. Every rank of a group starts
   * the group's transfers in the same order, and every slot started in a
   * call of a compiled function is waited for before it returns. A
   * backend that cannot overlap may finish the transfer inside the start
   * (wait then only reports its status). */
  int32_t (*all_reduce_start)(void *ctx, int32_t slot, int32_t group, void *buf,
                              int64_t count, loom_dtype dtype,
                              loom_reduction op);
  int32_t (*all_gather_start)(void *ctx, int32_t slot, int32_t group,
                              const void *send, void *recv, int64_t count,
                              loom_dtype dtype);
  int32_t (*reduce_scatter_start)(void *ctx, int32_t slot, int32_t group,
                                  const void *send, void *recv, int64_t count,
                                  loom_dtype dtype, loom_reduction op);
  int32_t (*wait)(void *ctx, int32_t slot);
} loom_comm;

typedef struct loom_call_frame {
  void *const *args;    /* one buffer per function argument */
  void *const *results; /* one buffer per function result */
  uint8_t *workspace;   /* plan.json's workspace_bytes, 64-byte aligned */
  const loom_comm *comm;
  int64_t micro_batch; /* the pipeline micro-batch this call runs (0 when
                          the step is not pipelined): dropout masks */
} loom_call_frame;

/* The version of this contract a program.so was compiled against; the
 * loader refuses any other. */
#define LOOM_PROGRAM_ABI_VERSION 3
int32_t loom_program_abi_version(void);

/* (ABI 3) The digest of the plan.json, followed by the schedule.json when
 * there is one, that were written with this program.so: the loader refuses
 * a plan edited, truncated or taken from another compile, whose shapes the
 * compiled code would not match. */
uint64_t loom_program_plan_digest(void);

/* The digest: 64-bit FNV-1a, continued over each file's bytes in turn
 * (start from LOOM_PLAN_DIGEST_SEED). */
#define LOOM_PLAN_DIGEST_SEED 0xcbf29ce484222325ull
static inline uint64_t
loom_plan_digest_update(uint64_t digest, const char *bytes, uint64_t size) {
  for (uint64_t i = 0; i < size; ++i) {
    digest ^= (uint8_t)bytes[i];
    digest *= 0x100000001b3ull;
  }
  return digest;
}

#ifdef __cplusplus
}
#endif

#endif /* LOOM_PROGRAM_H */
