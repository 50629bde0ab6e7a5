# lit configuration for mgc's golden tests (FileCheck) and negative tests.
import os

import lit.formats

config.name = "mgc"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mg", ".mgir", ".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mgc_obj_root, "tests", "lit")

# Tools: mgc from the build; FileCheck, not and count from LLVM.
config.environment["PATH"] = os.pathsep.join(
    [config.mgc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")]
)
config.substitutions.append(("%mgc_src", config.mgc_src_root))
config.substitutions.append(("%samples", os.path.join(config.mgc_src_root, "samples")))
# Diagnostics must not depend on the terminal.
config.environment["TERM"] = "dumb"

# The build folder (for tests that install from it), and whether the shared
# executor library was built there (a build of only the mgc tool lacks it).
config.substitutions.append(("%mgc_obj", config.mgc_obj_root))
if os.path.exists(os.path.join(config.mgc_obj_root, "runtime", "session", "libmgc.so")):
    config.available_features.add("libmgc")

# A sanitizer build (scripts/sanitize.sh) reserves terabytes of address
# space for its shadow memory: tests that limit virtual memory cannot run.
if getattr(config, "mgc_sanitize", "").upper() in ("ON", "TRUE", "1"):
    config.available_features.add("asan")
# The sanitizer settings reach the tests' processes.
for name in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
    if name in os.environ:
        config.environment[name] = os.environ[name]

# Tests that make device nodes of their own (mknod) need root.
if hasattr(os, "geteuid") and os.geteuid() == 0:
    config.available_features.add("root")

# Jobs of several processes: mpirun from Open MPI, when mgc was built with
# MPI. As root it needs --allow-run-as-root; CI has 2 cores, so more ranks
# than cores (--oversubscribe). The launcher's variables of the lit process
# itself must not reach the tests' single-process runs.
import shutil
for name in list(config.environment):
    if name.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_")) or name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        del config.environment[name]
if config.mgc_mpi.upper() in ("ON", "TRUE", "1") and shutil.which("mpirun"):
    # Shared memory only, without the cross-memory-attach copy that
    # containers restricting ptrace refuse.
    mpirun = "mpirun --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        mpirun += " --allow-run-as-root"
    # Under the sanitizers, Open MPI's own allocations that it keeps until
    # exit would fail every job (their stacks do not unwind for a
    # suppression to match): ranks run without leak detection.
    if "asan" in config.available_features:
        mpirun += " -x ASAN_OPTIONS=%s:detect_leaks=0" % os.environ.get("ASAN_OPTIONS", "")
    # The tests of several processes run where mpirun can start two.
    import subprocess
    try:
        probe = subprocess.run(mpirun.split() + ["-np", "2", "true"],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        works = probe.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        works = False
    if works:
        config.available_features.add("mpi")
        config.substitutions.append(("%mpirun", mpirun))
    else:
        lit_config.note("mpirun cannot start 2 processes here: the tests of several processes are unsupported")

# The convolutional samples train on scikit-learn's digits (shipped inside
# the package); scripts/test.sh installs it with pip where it can.
import importlib.util
if importlib.util.find_spec("sklearn") and importlib.util.find_spec("numpy"):
    config.available_features.add("sklearn")
else:
    lit_config.note("scikit-learn is not installed: the digits tests are unsupported")

# The Hugging Face checkpoint tests compare with transformers' own models
# (its Flax classes, which read torch-format files without torch), from a
# virtual environment that scripts/test.sh makes in the build folder.
import subprocess
hf_python = os.path.join(config.mgc_obj_root, "hf-venv", "bin", "python")
if os.path.exists(hf_python) and subprocess.run(
        [hf_python, "-c", "import transformers, flax, jax, safetensors, numpy"],
        stdin=subprocess.DEVNULL, capture_output=True).returncode == 0:
    config.available_features.add("hf")
    config.substitutions.append(("%hfpython", hf_python))
else:
    lit_config.note("no transformers environment in the build folder: the Hugging Face checkpoint tests are unsupported")
