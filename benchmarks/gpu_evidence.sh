#!/usr/bin/env bash
# Figures of `torchlint verify` on a GPU machine that has no network.
#
# 1. Where there is network, once: download the wheels torchlint needs besides torch,
#    for the GPU machine's Python (default 3.12, manylinux x86_64):
#        benchmarks/gpu_evidence.sh --prepare DIR [--python-version 3.12]
# 2. On the GPU machine, from this checkout (a python3 with a CUDA build of torch):
#        benchmarks/gpu_evidence.sh --wheels DIR --out OUT [--python python3] [-- VERIFY OPTIONS]
#    It installs what that python lacks from DIR (pip --no-index --target, into a
#    temporary folder; nothing of the machine's changes), imports torchlint from the
#    checkout, prints nvidia-smi and the torch/CUDA versions, and runs `torchlint verify`
#    with --json and --plot on examples/verify/slow_loader.py (loading-bound: the fixes
#    help) and examples/verify/compute_bound.py (the right answer is "no difference").
#    Without a GPU it says so and measures the CPU (the same steps, CPU figures).
#    verify runs with its own defaults except --window 3 --timeout 90 (to fit the
#    budget); options after -- are passed on (e.g. -- --repeats 8 --window 5).
#    First, `torchlint verify --profile` on benchmarks/profile_cuda.py checks the
#    patterns PyTorch's run-time matcher reports only for CUDA tensors: TL104 confirmed
#    by ExtraCUDACopyPattern, FP32MatMulPattern and MatMulDimInFP16Pattern seen at run
#    time only (without a GPU: TL104 not checkable, no CUDA-only pattern reported).
#
# OUT receives 8 files: run.log (everything printed), env.txt, SLUG.json and SLUG.html
# per example, profile_cuda.json, and evidence.tar.gz (all of them, profile_cuda.html and
# the logs of every run). The runs share --budget seconds (default 420): each verify is
# stopped when its share is spent.
# Exit status: 0 both examples measured and the profile check passed, 1 one of them did
# not, 2 bad input or setup.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    cat <<'EOF'
Options (run): --out DIR (required)  --wheels DIR  --python PY (python3)
  --budget S for all runs (420)  -- options for torchlint verify
Options (prepare): --prepare DIR  --python-version X.Y (3.12)  --python PY (python3)
EOF
}

die() {
    echo "gpu_evidence: error: $*" >&2
    exit 2
}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=python3
OUT="" WHEELS="" PREPARE="" PYVER=3.12 BUDGET=420
VERIFY=(--window 3 --timeout 90) # then what follows --
while [ $# -gt 0 ]; do
    case "$1" in
        -h | --help) usage; exit 0 ;;
        --) shift; VERIFY+=("$@"); break ;;
        --out | --wheels | --prepare | --python | --python-version | --budget)
            [ $# -ge 2 ] || die "$1 needs a value"
            case "$1" in
                --out) OUT=$2 ;;
                --wheels) WHEELS=$2 ;;
                --prepare) PREPARE=$2 ;;
                --python) PY=$2 ;;
                --python-version) PYVER=$2 ;;
                --budget) BUDGET=$2 ;;
            esac
            shift 2 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
command -v "$PY" >/dev/null 2>&1 || die "no Python at '$PY' (pass --python)"
case "$PY" in */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;; esac # absolute
[[ $BUDGET =~ ^[0-9]+$ ]] || die "--budget must be a whole number of seconds, got '$BUDGET'"

# -- 1. prepare: download wheels for the GPU machine ------------------------------------
if [ -n "$PREPARE" ]; then
    [[ $PYVER =~ ^3\.[0-9]+$ ]] || die "--python-version must look like 3.12, got '$PYVER'"
    # Pin what this checkout is tested with where this Python has it installed.
    mapfile -t REQS < <("$PY" - "$PYVER" <<'EOF'
import sys
from importlib import metadata

wanted = ["libcst", "pathspec", "typer", "nvidia-ml-py"]
if tuple(map(int, sys.argv[1].split("."))) < (3, 11):
    wanted.append("tomli")
for name in wanted:
    try:
        print(f"{name}=={metadata.version(name)}")
    except metadata.PackageNotFoundError:
        print(name)
EOF
    )
    mkdir -p "$PREPARE"
    echo "gpu_evidence: downloading ${REQS[*]} and their dependencies for CPython $PYVER, manylinux x86_64"
    if ! "$PY" -m pip download --only-binary=:all: --python-version "$PYVER" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$PREPARE" "${REQS[@]}"; then
        die "pip download failed (no network, or no wheel for CPython $PYVER): run --prepare where pip can reach PyPI"
    fi
    echo "gpu_evidence: wheels in $PREPARE; on the GPU machine: benchmarks/gpu_evidence.sh --wheels $PREPARE --out OUT"
    exit 0
fi

# -- 2. run -----------------------------------------------------------------------------
[ -n "$OUT" ] || die "--out DIR is required (or --prepare DIR; see --help)"
[ -z "$WHEELS" ] || [ -d "$WHEELS" ] || die "--wheels $WHEELS: no such folder"
[ -z "$WHEELS" ] || WHEELS=$(cd "$WHEELS" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-evidence.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" # not the checkout: python puts the working directory first on sys.path
exec > >(tee "$OUT/run.log") 2>&1
START=$SECONDS
echo "gpu_evidence: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n) ($(uname -sm)); checkout $ROOT"
echo "gpu_evidence: git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" status --porcelain 2>/dev/null | grep -q . && echo ' (with local changes)')"

{
    echo "## nvidia-smi"
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi || true
        nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm \
            --format=csv || true
    else
        echo "nvidia-smi: not found"
    fi
    echo "## python and torch"
    "$PY" - <<'EOF' || echo "torch: cannot be imported by this Python"
import platform, sys
print(f"python {platform.python_version()} ({sys.executable})")
import torch
print(f"torch {torch.__version__}, CUDA build {torch.version.cuda}, cuDNN "
      f"{torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None}")
print(f"cuda available: {torch.cuda.is_available()}, devices: {torch.cuda.device_count()}")
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(f"  {i}: {p.name}, {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs")
EOF
} | tee "$OUT/env.txt"
"$PY" -c "import torch" 2>/dev/null || die "$PY cannot import torch: pass --python with the Python that has it"
if "$PY" -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then
    MODE=GPU
else
    MODE=CPU
    echo "gpu_evidence: NO CUDA GPU visible to $PY: CPU fallback (the same steps; the figures are CPU figures)"
fi

# torchlint from this checkout (rules/ ships as torchlint.rules), its dependencies from
# the machine or from --wheels, all on PYTHONPATH for this script only.
mkdir -p "$WORK/src/torchlint" "$WORK/site" "$WORK/tmp"
(cd "$ROOT/torchlint" && tar --exclude=__pycache__ -cf - .) | tar -xf - -C "$WORK/src/torchlint"
(cd "$ROOT" && tar --exclude=__pycache__ -cf - rules) | tar -xf - -C "$WORK/src/torchlint"
export PYTHONPATH="$WORK/src:$WORK/site"
export TMPDIR="$WORK/tmp" # verify's run logs land here (into the tarball)
mapfile -t MISSING < <("$PY" - <<'EOF'
import importlib.util, sys
needs = {"libcst": "libcst", "yaml": "pyyaml", "pathspec": "pathspec", "typer": "typer",
         "pynvml": "nvidia-ml-py"}
if sys.version_info < (3, 11):
    needs["tomli"] = "tomli"
for module, requirement in needs.items():
    if importlib.util.find_spec(module) is None:
        print(requirement)
EOF
)
if [ ${#MISSING[@]} -gt 0 ]; then
    echo "gpu_evidence: this Python lacks ${MISSING[*]}"
    [ -n "$WHEELS" ] || die "no --wheels folder to install ${MISSING[*]} from: run benchmarks/gpu_evidence.sh --prepare DIR --python-version X.Y where there is network, copy DIR here, pass --wheels DIR"
    if "$PY" -m pip --version >/dev/null 2>&1; then
        echo "gpu_evidence: pip install --no-index --target (a temporary folder) from $WHEELS"
        "$PY" -m pip install --quiet --no-index --find-links "$WHEELS" --target "$WORK/site" \
            "${MISSING[@]}" || die "pip could not install ${MISSING[*]} from $WHEELS (wheels for another Python version or platform?)"
    else
        echo "gpu_evidence: no pip for $PY: unpacking the wheels of ${MISSING[*]} from $WHEELS"
        "$PY" - "$WHEELS" "$WORK/site" "${MISSING[@]}" <<'EOF' || die "cannot unpack the wheels"
import re, sys, zipfile
from pathlib import Path
folder, site, names = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
norm = lambda s: re.sub(r"[-_.]+", "_", s).lower()
for name in names:
    found = sorted(folder.glob(f"{norm(name)}-*.whl")) + sorted(folder.glob(f"{name}-*.whl"))
    if not found:
        sys.exit(f"no wheel for {name} in {folder}")
    zipfile.ZipFile(found[-1]).extractall(site)
EOF
    fi
fi
"$PY" - <<'EOF' || die "torchlint cannot be imported from the checkout (see above)"
from importlib.metadata import version
import libcst, torchlint, torchlint.cli, torchlint.lint.registry
print(f"gpu_evidence: torchlint {torchlint.__version__} from {torchlint.__file__}; "
      f"libcst {version('libcst')} from {libcst.__file__}; "
      f"{len(torchlint.lint.registry.all_rules())} rules")
EOF

STATUS=0
# The CUDA-only run-time patterns, joined with the static findings.
echo
echo "gpu_evidence: == profile_cuda (torchlint verify --profile) =="
rc=0
timeout -s INT -k 30 120 "$PY" -m torchlint verify "$ROOT/benchmarks/profile_cuda.py" --profile \
    --steps 10 --json "$OUT/profile_cuda.json" --plot "$WORK/profile_cuda.html" || rc=$?
echo "gpu_evidence: profile_cuda: torchlint verify --profile exited $rc"
if [ "$rc" -ne 0 ] || ! "$PY" - "$MODE" "$OUT/profile_cuda.json" <<'EOF'; then
import json, sys
mode, path = sys.argv[1], sys.argv[2]
report = json.load(open(path))["profile"]
tl104 = [f["status"] for f in report["findings"] if f["code"] == "TL104"]
seen = {r["pattern"] for r in report["runtime_only"]}
cuda_only = {"ExtraCUDACopyPattern", "FP32MatMulPattern", "MatMulDimInFP16Pattern"}
if mode == "GPU":
    # PyTorch skips FP32MatMulPattern where the GPU has no TF32 (before Ampere).
    no_tf32 = any("FP32MatMulPattern skipped" in n for n in report["notes"])
    checks = [
        ("the run used CUDA", report["cuda"]),
        ("TL104 confirmed by ExtraCUDACopyPattern", bool(tl104) and set(tl104) == {"confirmed"}),
        ("FP32MatMulPattern seen at run time only", "FP32MatMulPattern" in seen or no_tf32),
        ("MatMulDimInFP16Pattern seen at run time only", "MatMulDimInFP16Pattern" in seen),
    ]
else:
    checks = [
        ("TL104 not checkable without a GPU", bool(tl104) and set(tl104) == {"not checkable"}),
        ("no CUDA-only pattern reported on the CPU", not seen & cuda_only),
    ]
for name, ok in checks:
    print(f"gpu_evidence: profile check {'ok' if ok else 'FAILED'}: {name}")
sys.exit(0 if all(ok for _, ok in checks) else 1)
EOF
    STATUS=1
fi

run_example() { # slug, examples left after this one, script args...
    local slug=$1 left=$2
    shift 2
    local remaining=$((BUDGET - (SECONDS - START)))
    local share=$((remaining / (left + 1)))
    [ "$share" -gt 30 ] || { echo "gpu_evidence: $slug: out of time budget"; STATUS=1; return; }
    echo
    echo "gpu_evidence: == $slug (at most ${share}s) =="
    local rc=0
    timeout -s INT -k 30 "$share" "$PY" -m torchlint verify "$ROOT/examples/verify/$slug.py" \
        --unsafe-fixes "${VERIFY[@]}" --json "$OUT/$slug.json" --plot "$OUT/$slug.html" \
        -- "$@" || rc=$?
    echo "gpu_evidence: $slug: torchlint verify exited $rc"
    [ "$rc" -eq 0 ] || STATUS=1
}
run_example slow_loader 1 --epochs 1000
run_example compute_bound 0 --epochs 1000

echo
echo "gpu_evidence: $MODE, $((SECONDS - START))s, status $STATUS; outputs in $OUT"
# A snapshot of everything (run.log is still being written), then the tarball.
mkdir "$WORK/evidence"
cp "$OUT"/*.* "$WORK/evidence/"
[ ! -f "$WORK/profile_cuda.html" ] || cp "$WORK/profile_cuda.html" "$WORK/evidence/"
find "$WORK/tmp" -maxdepth 1 -name 'torchlint-verify-*' -exec cp -r {} "$WORK/evidence/" \;
rm -f "$WORK/evidence/evidence.tar.gz"
tar -czf "$OUT/evidence.tar.gz" -C "$WORK" evidence
exit "$STATUS"
