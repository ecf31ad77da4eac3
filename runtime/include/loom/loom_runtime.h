/*===- loom_runtime.h - The runtime's C ABI ------------------------------===*
 *
 * Loads a compiled artifact (loom-compile's model.loom directory, see
 * loom_program.h) and runs training steps of it on one rank of a job. A
 * job has world_size = pipeline ranks x devices of the stage grid ranks;
 * world rank r runs pipeline rank r / devices on grid device r % devices
 * (row-major grid index).
 *
 *   loom_artifact_load  -> loom_artifact (plan.json, schedule.json,
 *                          program.so; checked against this ABI)
 *   loom_mpi_comm_create -> the MPI backend's loom_comm for a rank
 *                          (MPI_Init must have been called)
 *   loom_session_create -> one rank's executor: its state (parameters,
 *                          optimizer moments) at the local shapes, a
 *                          workspace of the static memory plan's size
 *   loom_session_set_state / get_state, set_batch, step
 *
 * Every fallible call returns LOOM_OK (0) or a loom_status_code; the
 * message is then in loom_session_error / the caller's error buffer. No
 * function of the runtime exits or aborts the process.
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

/* loom_status_code: loom_program.h. */

typedef struct loom_artifact loom_artifact;
typedef struct loom_session loom_session;
typedef struct loom_mpi_comm loom_mpi_comm;

/* Loads the artifact directory `path`. On failure writes a message into
 * `error` (error_size bytes, may be 0) and sets *out_artifact to NULL. */
int32_t loom_artifact_load(const char *path, loom_artifact **out_artifact,
                           char *error, size_t error_size);
void loom_artifact_free(loom_artifact *artifact);
/* The number of ranks the artifact runs on. */
int32_t loom_artifact_world_size(const loom_artifact *artifact);
/* Tokens per step: the global batch's rows and sequence length. */
int64_t loom_artifact_batch_rows(const loom_artifact *artifact);
int64_t loom_artifact_seq_len(const loom_artifact *artifact);

/* The MPI backend for world rank `world_rank` of MPI_COMM_WORLD (whose
 * size must be the artifact's world size): one communicator per group of
 * the plan, created collectively, so every rank calls this together. */
int32_t loom_mpi_comm_create(const loom_artifact *artifact,
                             loom_mpi_comm **out_comm, char *error,
                             size_t error_size);
const loom_comm *loom_mpi_comm_table(loom_mpi_comm *comm);
/* The message of the last failed callback ("" if none). */
const char *loom_mpi_comm_error(const loom_mpi_comm *comm);
void loom_mpi_comm_free(loom_mpi_comm *comm);

/* One rank's executor. `comm` (may be NULL for a one-rank artifact) must
 * outlive the session. The state starts at zero. */
int32_t loom_session_create(const loom_artifact *artifact, int32_t world_rank,
                            const loom_comm *comm, loom_session **out_session,
                            char *error, size_t error_size);
void loom_session_free(loom_session *session);
/* The message of the last failed call on this session. */
const char *loom_session_error(const loom_session *session);
/* What the session runs now ("" between steps): for watchdogs. The
 * pointer stays valid for the session's life; reads may race with the
 * executor and see an older instruction. */
const char *loom_session_current(const loom_session *session);
/* Bytes of the workspace (the largest static memory plan) and of the state
 * and batch buffers this rank holds. */
int64_t loom_session_workspace_bytes(const loom_session *session);
int64_t loom_session_state_bytes(const loom_session *session);

/* The state tensors (parameters, moments) this rank holds a shard of.
 * key: "param:<name>", "m:<name>", "v:<name>". offsets/shape: where this
 * rank's shard sits in the global tensor (global_shape); owner: 1 on the
 * one rank that writes this shard to a checkpoint (replicas are 0). */
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
/* The shard's buffer (dense, row-major, at the local shape). */
void *loom_session_state_data(loom_session *session, int32_t index);
/* Copies this rank's shard out of `global` (row-major, global shape). */
int32_t loom_session_set_state_global(loom_session *session, int32_t index,
                                      const float *global);

/* The next step's batch: the whole global batch (rows x seq_len), of which
 * the session takes the rows its devices hold. */
int32_t loom_session_set_batch(loom_session *session, const int32_t *tokens,
                               const int32_t *labels);
/* Runs training step `step` (1-based: the optimizer's bias correction and
 * the dropout masks read it) and writes the step's loss (the same on every
 * rank). On failure the state is undefined. */
int32_t loom_session_step(loom_session *session, int64_t step,
                          double *out_loss);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_RUNTIME_H */
