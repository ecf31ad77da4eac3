/*===- loom_cuda_runtime.h - The CUDA runtime's C ABI --------------------===*
 *
 * Loads an artifact compiled for the CUDA backend (`loom-compile
 * --target=cuda`, plan.json "backend": "cuda") and trains it on one GPU:
 * the first slice of the CUDA runtime, for a one-device, unpipelined step
 * (`train_step`, no collectives). The names mirror loom_runtime.h's with a
 * `loom_cuda_` prefix, and so do the status codes and the state info.
 *
 *   loom_cuda_artifact_load  -> plan.json + program.so, whose loom_cuda_*
 *                               calls resolve against libloom_cuda_kernels
 *   loom_cuda_session_create -> a CUDA stream and kernel context on the
 *                               current device, the state (parameters and
 *                               moments, double-buffered) and a workspace
 *                               of the memory plan's size in device memory
 *   loom_cuda_session_set_state_global, set_batch, step
 *
 * Every fallible call returns LOOM_OK (0) or a loom_status_code; the
 * message is then in loom_cuda_session_error / the caller's error buffer.
 * A CUDA or kernel failure is LOOM_ERROR_KERNEL. Nothing here exits.
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

/* A session on CUDA device `device`, which becomes the calling thread's
 * current device. The artifact must outlive it. The state starts at
 * zero. */
int32_t loom_cuda_session_create(const loom_cuda_artifact *artifact,
                                 int32_t device,
                                 loom_cuda_session **out_session, char *error,
                                 size_t error_size);
void loom_cuda_session_free(loom_cuda_session *session);
/* The message of the last failed call on this session. */
const char *loom_cuda_session_error(const loom_cuda_session *session);
/* Device bytes of the workspace and of the state (both copies). */
int64_t loom_cuda_session_workspace_bytes(const loom_cuda_session *session);
int64_t loom_cuda_session_state_bytes(const loom_cuda_session *session);

/* The state tensors ("param:<name>", "m:<name>", "v:<name>"), whole: on
 * one device offsets are 0 and owner is 1. The info's pointers live as
 * long as the session. */
int32_t loom_cuda_session_state_count(const loom_cuda_session *session);
int32_t loom_cuda_session_state_info(const loom_cuda_session *session,
                                     int32_t index, loom_state_info *out_info);
/* Copies `global` (host memory, row-major, f32) into the tensor. */
int32_t loom_cuda_session_set_state_global(loom_cuda_session *session,
                                           int32_t index, const float *global);
/* Copies the tensor (f32) into `out_global` (host memory). */
int32_t loom_cuda_session_get_state_global(loom_cuda_session *session,
                                           int32_t index, float *out_global);

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
