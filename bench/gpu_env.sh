# Sourced by the GPU scripts: $OUT, the wheels from ../shared/gpu/wheelhouse.sh (in .whl/) installed with
# bytecode (the GPU hosts set PYTHONDONTWRITEBYTECODE=1; without it every process compiles SQLAlchemy, Optuna
# and autotune from source, ~1 s a command: RESULTS section 22), and the GPU's name in $OUT/gpu.txt.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
python3 -m compileall -q -j 8 /tmp/site autotune > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
