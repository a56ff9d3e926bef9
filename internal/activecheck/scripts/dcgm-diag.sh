# DCGMDiag: NVIDIA DCGM's diagnostic at DCGM_LEVEL, against a host engine of the job's own when
# none answers.
command -v dcgmi >/dev/null || { echo "dcgmi is not in the jail: install NVIDIA DCGM in the jail for this check"; exit 1; }
if ! dcgmi discovery -l >/dev/null 2>&1 && command -v nv-hostengine >/dev/null; then
  nv-hostengine --pid "/tmp/nv-hostengine.$SLURM_JOB_ID.pid" >/dev/null 2>&1
  trap 'kill "$(cat "/tmp/nv-hostengine.$SLURM_JOB_ID.pid" 2>/dev/null)" 2>/dev/null' EXIT
  sleep 2
fi
out=$(dcgmi diag -r "$DCGM_LEVEL" 2>&1)
rc=$?
failed=$(printf '%s\n' "$out" | grep -E '\| *Fail' | sed 's/[|]/ /g; s/  */ /g' | head -n 3 | paste -sd';' -)
if [ "$rc" -ne 0 ] || [ -n "$failed" ]; then
  echo "dcgmi diag -r $DCGM_LEVEL failed (exit $rc):${failed:- $(printf '%s\n' "$out" | tail -n 2 | paste -sd' ' -)}"
  exit 1
fi
echo "dcgmi diag -r $DCGM_LEVEL passed"
