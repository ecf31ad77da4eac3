/*===- loom_runtime.h - The runtime's C ABI ------------------------------===*
 *
 * Loads a compiled artifact (loom-compile's model.loom directory, see
 * loom_program.h) and runs training steps of it on one rank of a job, on
 * the backend it was compiled for (plan.json's "backend": cpu or cuda). A
 * job has world_size = pipeline ranks x devices of the stage grid ranks;
 * world rank r runs pipeline rank r / devices on grid device r % devices
 * (row-major grid index).
 *
 *   loom_artifact_load   -> loom_artifact (plan.json, schedule.json,
 *                           program.so; checked against this ABI)
 *   loom_session_create  -> one rank's executor on the backend the options
 *                           name: its device, its communication (MPI on
 *                           the CPU; NCCL or MPI through host memory on
 *                           GPUs), its state at the local shapes
 *   loom_session_set_state / get_state, set_batch, step
 *
 * The CPU backend is built into this library. The CUDA backend is a driver
 * library, libloom_cuda_driver.so, opened when an artifact or a session
 * asks for cuda: the file $LOOM_CUDA_DRIVER names when it is set (only
 * it), else the one next to this library, else wherever the dynamic linker
 * finds it. Without it, asking for cuda is LOOM_ERROR_UNAVAILABLE.
 *
 * Every fallible call returns LOOM_OK (0) or a loom_status_code
 * (loom_program.h), set by the layer that failed; the message is then in
 * loom_session_error / the caller's error buffer. No function of the
 * runtime exits or aborts the process.
 *
 *===----------------------------------------------------------------------===*/

#ifndef LOOM_RUNTIME_H
#define LOOM_RUNTIME_H

#include "loom/loom_program.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_artifact loom_artifact;
typedef struct loom_session loom_session;

/* Loads the artifact directory `path` for the backend its plan.json names
 * (a cuda artifact opens the CUDA driver, whose kernels program.so calls).
 * On failure writes a message into `error` (error_size bytes, may be 0)
 * and sets *out_artifact to NULL. */
int32_t loom_artifact_load(const char *path, loom_artifact **out_artifact,
                           char *error, size_t error_size);
void loom_artifact_free(loom_artifact *artifact);
/* "cpu" or "cuda": the backend the artifact was compiled for. */
const char *loom_artifact_backend(const loom_artifact *artifact);
/* The number of ranks the artifact runs on. */
int32_t loom_artifact_world_size(const loom_artifact *artifact);
/* Tokens per step: the global batch's rows and sequence length. */
int64_t loom_artifact_batch_rows(const loom_artifact *artifact);
int64_t loom_artifact_seq_len(const loom_artifact *artifact);
/* The vocabulary: every token id of a batch must be below it (plan.json's
 * "vocab_size"); 0 when the artifact does not record it (loom-compile of
 * a module lowered already, or an older loom-compile). A batch holding an
 * id past it fails inside loom_session_step; callers check the ids first. */
int64_t loom_artifact_vocab_size(const loom_artifact *artifact);

typedef enum loom_backend {
  LOOM_BACKEND_CPU = 0,
  LOOM_BACKEND_CUDA = 1,
} loom_backend;

/* How the ranks of a job reach each other (docs/runtime.md, docs/cuda.md). */
typedef enum loom_comm_kind {
  /* The CPU backend: MPI. The cuda backend: NCCL when every rank of each
   * node has a GPU of its own and NCCL was built in, else staged. */
  LOOM_COMM_AUTO = 0,
  /* MPI on host buffers (the CPU backend's only kind). */
  LOOM_COMM_MPI = 1,
  /* cuda: NCCL communicators per group (ncclCommSplit, bootstrapped over
   * MPI), collectives and stage transfers on the session's stream, a
   * watchdog that aborts them instead of hanging. One GPU per rank. */
  LOOM_COMM_NCCL = 2,
  /* cuda: MPI through pinned host buffers; ranks may share a GPU. */
  LOOM_COMM_STAGED = 3,
} loom_comm_kind;

typedef struct loom_session_options {
  /* Must be the artifact's backend (loom_artifact_backend). */
  loom_backend backend;
  /* cuda: the GPU, which becomes the calling thread's current device;
   * negative: the rank's index among the ranks of its node modulo the
   * node's GPUs. */
  int32_t device;
  loom_comm_kind comm;
  /* cuda with NCCL: how long a step may wait for its peers (0: no bound). */
  double timeout_seconds;
} loom_session_options;

/* The defaults: cpu, device -1, LOOM_COMM_AUTO, no timeout. */
void loom_session_options_init(loom_session_options *options);

/* This process's rank of the artifact's job. With MPI initialized, the
 * world rank is the MPI_COMM_WORLD rank (whose size must be the artifact's
 * world size) and the call is collective: every rank calls it together.
 * Without MPI, the artifact must run on one rank, and it runs without
 * communication. The artifact must outlive the session; the state starts
 * at zero. */
int32_t loom_session_create(const loom_artifact *artifact,
                            const loom_session_options *options,
                            loom_session **out_session, char *error,
                            size_t error_size);
void loom_session_free(loom_session *session);
/* The message of the last failed call on this session. */
const char *loom_session_error(const loom_session *session);
/* "mpi", "nccl", "staged" or "none": how this rank talks to the others. */
const char *loom_session_comm_name(const loom_session *session);
/* What the session runs now ("" between steps): for watchdogs. The
 * pointer stays valid for the session's life; reads may race with the
 * executor and see an older instruction. */
const char *loom_session_current(const loom_session *session);
/* Bytes of the workspace (the largest static memory plan) and of the state
 * (both copies) on the session's device. */
int64_t loom_session_workspace_bytes(const loom_session *session);
int64_t loom_session_state_bytes(const loom_session *session);

/* The state tensors (parameters, moments) this rank holds a shard of.
 * key: "param:<name>", "m:<name>", "v:<name>". offsets/shape: where this
 * rank's shard sits in the global tensor (global_shape); owner: 1 on the
 * one rank that writes this shard to a checkpoint (replicas are 0). The
 * info's pointers live as long as the session. */
typedef struct loom_state_info {
  const char *key;
  loom_dtype dtype;
  int32_t rank;
  const int64_t *shape;
  const int64_t *global_shape;
  const int64_t *offsets;
  int32_t owner;
} loom_state_info;
int32_t loom_session_state_count(const loom_session *session);
int32_t loom_session_state_info(const loom_session *session, int32_t index,
                                loom_state_info *out_info);
/* This rank's shard, at its local shape and dtype (dense, row-major), to or
 * from host memory (checkpoints). */
int32_t loom_session_get_state(loom_session *session, int32_t index,
                               void *out_local);
int32_t loom_session_set_state(loom_session *session, int32_t index,
                               const void *local);
/* Copies this rank's shard out of `global` (f32, host memory, row-major,
 * global shape). */
int32_t loom_session_set_state_global(loom_session *session, int32_t index,
                                      const float *global);
/* Copies the tensor (f32) into `out_global` (host memory): only when this
 * rank holds it whole. */
int32_t loom_session_get_state_global(loom_session *session, int32_t index,
                                      float *out_global);

/* The next step's batch: the whole global batch (rows x seq_len token ids
 * and labels, host memory), of which the session takes the rows its
 * devices hold. */
int32_t loom_session_set_batch(loom_session *session, const int32_t *tokens,
                               const int32_t *labels);
/* Runs training step `step` (1-based: the optimizer's bias correction and
 * the dropout masks read it), waits for the device and writes the step's
 * loss (the same on every rank). On failure the state is undefined. */
int32_t loom_session_step(loom_session *session, int64_t step,
                          double *out_loss);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_RUNTIME_H */
