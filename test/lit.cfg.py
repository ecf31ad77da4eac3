# lit configuration of Loom's FileCheck tests.
#
# Features: `mpi` when mpirun is on PATH, `cuda-gpu` when Loom was built
# with CUDA and loom-cuda-probe finds a device, `torch` when Debian's
# /usr/bin/python3 imports torch (python3-torch; utils/run-tests.sh
# installs it), `onnx` when it imports onnx (python3-onnx, which builds the
# ONNX importer's small test graphs). Substitutions: %loom_src (the source tree), %examples, %reference (the PyTorch reference
# scripts in test/reference) and %python (/usr/bin/python3: Debian's Python
# packages install for it, whatever python3 comes first on PATH) and
# %mpirun (mpirun allowed to oversubscribe the cores, and to run as root).

import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "Loom"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.loom_obj_root, "test")
config.excludes = [
    "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Unit", "Inputs"
]
config.substitutions.append(("%examples", os.path.join(config.loom_src_root, "examples")))
config.substitutions.append(("%reference", os.path.join(config.loom_src_root, "test", "reference")))
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(("%loom_src", config.loom_src_root))

llvm_config.with_system_environment(["HOME", "PATH"])
llvm_config.use_default_substitutions()
# `not` and `count` at the start of a RUN line are found through PATH.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["loom-opt", "loom-compile", "loom-import", "loom-run", "loom-tokenize", "loom-calibrate", "loom-plan",
     "loom-checkpoint"],
    [config.loom_tools_dir, config.llvm_tools_dir]
)

if shutil.which("mpirun"):
    config.available_features.add("mpi")
# Tests start more ranks than a small machine has cores; containers run
# them as root, which OpenMPI refuses unless told twice.
config.substitutions.append(("%mpirun", "mpirun --oversubscribe"))
if os.geteuid() == 0:
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"

if config.loom_enable_cuda:
    probe = os.path.join(config.loom_tools_dir, "loom-cuda-probe")
    if os.path.exists(probe) and subprocess.call(
        [probe], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) == 0:
        config.available_features.add("cuda-gpu")

for module in ("torch", "onnx"):
    if os.path.exists("/usr/bin/python3") and subprocess.call(
        ["/usr/bin/python3", "-c", "import " + module],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) == 0:
        config.available_features.add(module)
