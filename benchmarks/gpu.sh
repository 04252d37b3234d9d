#!/usr/bin/env bash
# P1 and P2 on a CUDA GPU, installing what they need; about 5 minutes in all on a fresh machine;
# then, where nats-server is installed, the hearing benchmark with its workers on the GPU.
#
#     benchmarks/gpu.sh            # JSON to $OUT/bench-gpu.json when OUT is set, else bench-out/
#
# CTranslate2's wheels from PyPI carry CUDA support; they need the CUDA 12 cuBLAS and cuDNN 9
# libraries, which NVIDIA publishes as pip packages. Their folders go on LD_LIBRARY_PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
out_dir=${OUT:-bench-out}
mkdir -p "$out_dir"
python=${PYTHON:-python3}

# Says why the run cannot be made, as JSON where the figures would go, and stops.
unavailable() {
    printf '{"unavailable": "%s"}\n' "$1" > "$out_dir/bench-gpu.json"
    echo "benchmarks/gpu.sh: cannot run: $1" >&2
    exit 3
}

if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
# What follows comes from PyPI. A machine that cannot reach it is told so at once, rather than
# after minutes of failing installs: the lent H200s have no network, and their image holds CUDA
# 13's libraries only, while CTranslate2's wheels load CUDA 12's cuBLAS (libcublas.so.12), a
# 554 MiB wheel, far over what a call may carry (docs/benchmarks.md, "GPU").
if timeout 30 .venv/bin/pip index versions --timeout 5 --retries 0 ctranslate2 >/dev/null 2>&1; then
    if ! .venv/bin/python -c "import voicegate_lab.bench, faster_whisper" 2>/dev/null; then
        .venv/bin/pip install -q -e . -e lab || unavailable "pip install -e . -e lab failed"
    fi
    .venv/bin/pip install -q nvidia-cublas-cu12 "nvidia-cudnn-cu12==9.*" ||
        unavailable "the CUDA 12 cuBLAS and cuDNN 9 wheels did not install"
else
    .venv/bin/python -c "import voicegate_lab.bench, faster_whisper" 2>/dev/null ||
        unavailable "no package index here, and voicegate is not installed in .venv"
    .venv/bin/python -c "import ctypes; ctypes.CDLL('libcublas.so.12')" 2>/dev/null ||
        unavailable "no package index here, and no CUDA 12 cuBLAS (libcublas.so.12) for CTranslate2"
fi
# The wheels' library folders, where they were installed (else the system's are used).
libs=$(.venv/bin/python - 2>/dev/null <<'PY' || true
import os
import nvidia.cublas.lib
import nvidia.cudnn.lib
print(os.path.dirname(nvidia.cublas.lib.__file__) + ":" + os.path.dirname(nvidia.cudnn.lib.__file__))
PY
)
if [ -n "$libs" ]; then
    export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
echo "installed in $(( $(date +%s) - started )) s"

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
.venv/bin/python -c "import ctranslate2, sys; n = ctranslate2.get_cuda_device_count(); \
print('ctranslate2', ctranslate2.__version__, 'CUDA devices', n); sys.exit(0 if n else 1)"

# Whatever is left of the 5 minutes, and never less than two.
left=$(( 300 - ($(date +%s) - started) ))
[ "$left" -lt 120 ] && left=120
timeout "$left" .venv/bin/voicegate bench p1 p2 --device cuda \
    --json "$out_dir/bench-gpu.json" --work "${TMPDIR:-/tmp}/voicegate-bench-gpu"

# A recogniser worker on the GPU, where a NATS server can be started: the hearing benchmark's
# workers then hear on CUDA for a gate on this machine (docs/architecture.md, "Many gates").
if command -v nats-server >/dev/null 2>&1; then
    nats_dir="${TMPDIR:-/tmp}/voicegate-nats-gpu"
    mkdir -p "$nats_dir"
    nats-server -js -a 127.0.0.1 -p 4223 -sd "$nats_dir" >"$nats_dir/log" 2>&1 &
    nats_pid=$!
    trap 'kill "$nats_pid" 2>/dev/null || true' EXIT
    left=$(( 600 - ($(date +%s) - started) ))
    [ "$left" -gt 60 ] && timeout "$left" .venv/bin/voicegate bench hearing --device cuda \
        --nats nats://127.0.0.1:4223 --json "$out_dir/bench-gpu-hearing.json" || true
else
    echo "no nats-server here: the GPU worker's benchmark is not run" >&2
fi
echo "done in $(( $(date +%s) - started )) s: $out_dir/bench-gpu.json"
