/*===- loom_cuda_runtime.h - The CUDA runtime's C ABI --------------------===*
 *
 * Loads an artifact compiled for the CUDA backend (`loom-compile
 * --target=cuda`, plan.json "backend": "cuda") and trains it, one process
 * per rank: the executor the CPU runtime runs (runtime/executor: SPMD
 * steps, pipeline schedules, resharded state) on one GPU's memory and
 * stream, with the job's collectives and stage transfers over NCCL or over
 * MPI through host memory. The names mirror loom_runtime.h's with a
 * `loom_cuda_` prefix, and so do the status codes and the state info.
 *
 *   loom_cuda_artifact_load  -> plan.json (+ schedule.json) + program.so,
 *                               whose loom_cuda_* calls resolve against
 *                               libloom_cuda_kernels
 *   loom_cuda_session_create -> one rank of a one-rank job, no
 *                               communication (no MPI needed)
 *   loom_cuda_session_create_rank
 *                            -> this process's rank of an MPI job (world
 *                               rank = MPI_COMM_WORLD rank), its
 *                               communication (NCCL or staged) set up
 *   loom_cuda_session_set_state_global / set_state, set_batch, step
 *
 * Every fallible call returns LOOM_OK (0) or a loom_status_code; the
 * message is then in loom_cuda_session_error / the caller's error buffer.
 * A CUDA or kernel failure is LOOM_ERROR_KERNEL; an NCCL or MPI failure,
 * or the watchdog's abort, LOOM_ERROR_COMMUNICATION, with the rank and the
 * schedule instruction in the message. Nothing here exits.
 *
 *===----------------------------------------------------------------------===*/

#ifndef LOOM_CUDA_RUNTIME_H
#define LOOM_CUDA_RUNTIME_H

#include "loom/loom_runtime.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_cuda_artifact loom_cuda_artifact;
typedef struct loom_cuda_session loom_cuda_session;

/* Loads the artifact directory `path` (a --target=cuda artifact of one
 * device without a schedule). On failure writes a message into `error`
 * (error_size bytes, may be 0) and sets *out_artifact to NULL. */
int32_t loom_cuda_artifact_load(const char *path,
                                loom_cuda_artifact **out_artifact, char *error,
                                size_t error_size);
void loom_cuda_artifact_free(loom_cuda_artifact *artifact);
/* Tokens per step: the batch's rows and sequence length. */
int64_t loom_cuda_artifact_batch_rows(const loom_cuda_artifact *artifact);
int64_t loom_cuda_artifact_seq_len(const loom_cuda_artifact *artifact);

/* The ranks of the artifact's job (pipeline ranks x devices per stage). */
int32_t loom_cuda_artifact_world_size(const loom_cuda_artifact *artifact);

/* A session of a one-rank artifact on CUDA device `device`, which becomes
 * the calling thread's current device; no communication backend and no
 * MPI. The artifact must outlive the session. The state starts at zero. */
int32_t loom_cuda_session_create(const loom_cuda_artifact *artifact,
                                 int32_t device,
                                 loom_cuda_session **out_session, char *error,
                                 size_t error_size);

/* How the ranks of a job reach each other (docs/cuda.md, "Communication"). */
typedef enum loom_cuda_comm_kind {
  /* NCCL when every rank of each node has a GPU of its own and NCCL was
   * built in, else staged. */
  LOOM_CUDA_COMM_AUTO = 0,
  /* NCCL: a world communicator bootstrapped over MPI (rank 0's unique id
   * broadcast), one ncclCommSplit per communicator group, collectives and
   * stage transfers on the session's stream, a watchdog that aborts the
   * communicators (ncclCommAbort) instead of hanging. One GPU per rank. */
  LOOM_CUDA_COMM_NCCL = 1,
  /* MPI through pinned host buffers (the CPU backend's MpiComm): slower,
   * but ranks may share a GPU, so a multi-rank schedule runs on one. */
  LOOM_CUDA_COMM_STAGED = 2,
} loom_cuda_comm_kind;

/* This process's rank of an MPI job: MPI must be initialized, with the
 * artifact's world size (loom_cuda_artifact_world_size) in
 * MPI_COMM_WORLD. Collective: every rank calls it. `device` becomes the
 * current device (negative: the rank's index among the ranks of its node
 * modulo the node's GPUs); `timeout_seconds` bounds how long a step may
 * wait for its peers under NCCL (0: no bound). */
int32_t loom_cuda_session_create_rank(const loom_cuda_artifact *artifact,
                                      int32_t device, loom_cuda_comm_kind comm,
                                      double timeout_seconds,
                                      loom_cuda_session **out_session,
                                      char *error, size_t error_size);
/* "nccl", "staged" or "none": the backend the session's ranks talk over. */
const char *loom_cuda_session_comm_name(const loom_cuda_session *session);
/* The schedule instruction a failing or hanging step was at ("" between
 * steps). */
const char *loom_cuda_session_current(const loom_cuda_session *session);
void loom_cuda_session_free(loom_cuda_session *session);
/* The message of the last failed call on this session. */
const char *loom_cuda_session_error(const loom_cuda_session *session);
/* Device bytes of the workspace and of the state (both copies). */
int64_t loom_cuda_session_workspace_bytes(const loom_cuda_session *session);
int64_t loom_cuda_session_state_bytes(const loom_cuda_session *session);

/* The state tensors this rank holds ("param:<name>", "m:<name>",
 * "v:<name>"): each one's local shard and where it sits in the global
 * tensor, as loom_session_state_info says. The info's pointers live as
 * long as the session. */
int32_t loom_cuda_session_state_count(const loom_cuda_session *session);
int32_t loom_cuda_session_state_info(const loom_cuda_session *session,
                                     int32_t index, loom_state_info *out_info);
/* Sets the tensor (f32) from the whole tensor `global` (host memory,
 * row-major): this rank's shard of it. */
int32_t loom_cuda_session_set_state_global(loom_cuda_session *session,
                                           int32_t index, const float *global);
/* Copies the tensor (f32) into `out_global` (host memory): only when this
 * rank holds it whole. */
int32_t loom_cuda_session_get_state_global(loom_cuda_session *session,
                                           int32_t index, float *out_global);
/* This rank's shard, at its local shape and dtype, to or from host memory
 * (checkpoints). */
int32_t loom_cuda_session_get_state(loom_cuda_session *session, int32_t index,
                                    void *out_local);
int32_t loom_cuda_session_set_state(loom_cuda_session *session, int32_t index,
                                    const void *local);

/* The next step's batch (rows x seq_len token ids and labels, host
 * memory), copied to the device. */
int32_t loom_cuda_session_set_batch(loom_cuda_session *session,
                                    const int32_t *tokens,
                                    const int32_t *labels);
/* Runs training step `step` (1-based: AdamW's bias correction reads it),
 * waits for the device and writes the step's loss. On failure the state is
 * undefined. */
int32_t loom_cuda_session_step(loom_cuda_session *session, int64_t step,
                               double *out_loss);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_CUDA_RUNTIME_H */
