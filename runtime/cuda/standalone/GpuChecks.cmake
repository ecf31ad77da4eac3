# The training checks of a GPU node (ctest label `cuda-gpu`, with the
# conformance and communicator tests): each trains a --target=cuda artifact
# prepared on a machine with LLVM (utils/gpu-node.sh prepare DIR writes
# DIR/train) through the runtime (libloom_runtime.so and its CUDA driver,
# libloom_cuda_driver.so), with runtime/cuda/tools/
# loom_cuda_train.py, and compares its losses step by step with the log of
# the same step on the CPU or in the reference interpreter, prepared with
# it (runtime/cuda/tools/loom_cuda_check.py). Each is skipped (77) when the
# runtime sees no device.
#
#   cmake -S runtime/cuda/standalone -B build-gpu -DLOOM_GPU_ARTIFACTS=DIR \
#     -DLOOM_NLOHMANN_JSON_INCLUDE_DIR=DIR/include
#   cmake --build build-gpu && ctest --test-dir build-gpu -L cuda-gpu
#
# LOOM_GPU_DRIVER names another CUDA driver to train through than the one
# built here (the tests set LOOM_CUDA_DRIVER to it): the main build's
# libloom_cuda_driver_fake.so runs every check's host side on Loom's fake
# device (docs/cuda.md), where the losses are meaningless and the
# comparisons fail.
set(LOOM_GPU_ARTIFACTS "" CACHE PATH
    "Artifacts of utils/gpu-node.sh prepare: adds the training checks")
set(LOOM_GPU_DRIVER "" CACHE FILEPATH
    "The CUDA driver the training checks train through (default: this build's)")
if(NOT LOOM_GPU_ARTIFACTS)
  return()
endif()

set(train ${LOOM_GPU_ARTIFACTS}/train)
foreach(file corpus.tokens init.safetensors cpu.jsonl gpt2-bf16.loom
        gpt2-f32.loom init-v250.safetensors cpu-v250.jsonl gpt2-f32-v250.loom
        parallel/ref.jsonl parallel/dp.loom parallel/tp.loom
        parallel/zero3.loom parallel/pp-1f1b.loom parallel/pp-one-rank.loom)
  if(NOT EXISTS ${train}/${file})
    message(FATAL_ERROR "LOOM_GPU_ARTIFACTS: no ${train}/${file} "
                        "(utils/gpu-node.sh prepare writes it)")
  endif()
endforeach()
if(NOT TARGET loom_runtime OR NOT TARGET loom_cuda_driver)
  message(FATAL_ERROR "LOOM_GPU_ARTIFACTS: the training checks need "
                      "loom_runtime and loom_cuda_driver, which this build "
                      "lacks (above)")
endif()
set(runtime $<TARGET_FILE:loom_runtime>)
set(driver_environment)
if(LOOM_GPU_DRIVER)
  set(driver_environment ENVIRONMENT LOOM_CUDA_DRIVER=${LOOM_GPU_DRIVER})
endif()
find_package(Python3 REQUIRED COMPONENTS Interpreter)
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/train)

# loom_gpu_train_check(NAME ARTIFACT STEPS REFERENCE RTOL [INIT file]
#   [MEAN_RTOL m] [RANKS n] [COMM staged|nccl] [MIN_DEVICES n])
function(loom_gpu_train_check name artifact steps reference rtol)
  cmake_parse_arguments(PARSE_ARGV 5 arg ""
                        "INIT;MEAN_RTOL;RANKS;COMM;MIN_DEVICES" "")
  set(init ${train}/init.safetensors)
  set(extra)
  if(arg_INIT)
    set(init ${train}/${arg_INIT})
  endif()
  if(arg_MEAN_RTOL)
    list(APPEND extra --mean-rtol ${arg_MEAN_RTOL})
  endif()
  if(arg_RANKS)
    list(APPEND extra --ranks ${arg_RANKS} --comm ${arg_COMM}
         --mpirun ${MPIEXEC_EXECUTABLE})
  endif()
  if(arg_MIN_DEVICES)
    list(APPEND extra --min-devices ${arg_MIN_DEVICES})
  endif()
  add_test(NAME train/${name}
           COMMAND ${Python3_EXECUTABLE}
                   ${LOOM_ROOT}/runtime/cuda/tools/loom_cuda_check.py train
                   --name ${name} --lib ${runtime}
                   --artifact ${train}/${artifact} --init ${init}
                   --data ${train}/corpus.tokens --steps ${steps}
                   --reference ${train}/${reference} --rtol ${rtol} ${extra}
                   --log-json ${PROJECT_BINARY_DIR}/train/${name}.jsonl)
  set_tests_properties(train/${name} PROPERTIES LABELS "cuda-gpu;train"
                       SKIP_RETURN_CODE 77 TIMEOUT 180 ${driver_environment})
endfunction()

# The tiny GPT-2 (batch 8 x 64, AdamW lr 3e-3), 50 steps on one GPU against
# the same step compiled for the CPU in f32. bf16 (bf16 activations and
# compute copies of the weights, f32 master weights and moments): 6e-2 per
# step and 2e-3 on average. Step 20 is where every run's loss jumps (3.01
# -> 3.47 on the CPU) and where bf16 runs part most: 2.4e-2 measured on an
# H100 with the tensor-core attention (3.38), 5.2e-2 on an H200 with
# cuDNN's (3.64), as a bf16 run strays 6e-2 from the f32 one there even in
# the reference interpreter; at most 3.3e-3 at every other step (H200),
# 1.0e-3 (H100) and 1.75e-3 (H200) on average. f32: the same math in another order
# (cuBLASLt GEMMs, atomics in embedding_grad), 1e-4; measured 2.2e-6.
# v250: a vocabulary of 250, which loom-compile pads to 256 as it pads
# GPT-2's 50257 (f32: a bf16 run of this model strays 6e-2 from the f32
# one at step 20 even in the reference interpreter).
loom_gpu_train_check(gpt2-bf16 gpt2-bf16.loom 50 cpu.jsonl 6e-2
                     MEAN_RTOL 2e-3)
loom_gpu_train_check(gpt2-f32 gpt2-f32.loom 50 cpu.jsonl 1e-4)
loom_gpu_train_check(gpt2-f32-v250 gpt2-f32-v250.loom 50 cpu-v250.jsonl 1e-4
                     INIT init-v250.safetensors)

# Parallel schedules of the f32 step at 8 x 32, 10 steps against the
# reference interpreter's unsharded float32 run, 1e-4 per step (partial
# sums added across ranks and micro-batches in another order too): pinned
# DP, Megatron TP and ZeRO-3 and a 2-stage 1F1B pipeline on two ranks that
# share device 0 (host-staged communication), and 2 virtual stages on one
# rank, alone and as a world of one over NCCL; DP over NCCL needs one
# device per rank.
if(TARGET loom_cuda_comm)
  foreach(scheme dp tp zero3 pp-1f1b)
    loom_gpu_train_check(${scheme}-staged parallel/${scheme}.loom 10
                         parallel/ref.jsonl 1e-4 RANKS 2 COMM staged)
  endforeach()
endif()
loom_gpu_train_check(pp-one-rank parallel/pp-one-rank.loom 10
                     parallel/ref.jsonl 1e-4)
if(TARGET loom_cuda_comm AND LOOM_NCCL_INCLUDE_DIR AND LOOM_NCCL_LIBRARY)
  loom_gpu_train_check(pp-one-rank-nccl parallel/pp-one-rank.loom 10
                       parallel/ref.jsonl 1e-4 RANKS 1 COMM nccl)
  loom_gpu_train_check(dp-nccl parallel/dp.loom 10 parallel/ref.jsonl 1e-4
                       RANKS 2 COMM nccl MIN_DEVICES 2)
else()
  message(STATUS "No NCCL or no MPI: the NCCL training checks are left out")
endif()
