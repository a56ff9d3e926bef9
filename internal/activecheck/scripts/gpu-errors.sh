# GPUErrors: uncorrected ECC errors since the driver loaded, pending or failed row remapping,
# and the Xid errors that mean a broken GPU in the kernel log of the last WINDOW_MIN minutes.
command -v nvidia-smi >/dev/null || { echo "nvidia-smi is not in the jail"; exit 1; }
problems=""
if ! ecc=$(nvidia-smi --query-gpu=index,ecc.errors.uncorrected.volatile.total --format=csv,noheader,nounits 2>&1); then
  echo "nvidia-smi failed: $ecc"
  exit 1
fi
while IFS=', ' read -r i n; do
  case $n in '' | *N/A* | *Not* | 0) ;; *) problems="$problems GPU $i: $n uncorrected ECC errors;" ;; esac
done <<<"$ecc"
if rows=$(nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure --format=csv,noheader 2>/dev/null); then
  while IFS=', ' read -r bus pending failure; do
    case $pending in Yes | yes | 1) problems="$problems GPU $bus: a row remap is pending (reset the GPU);" ;; esac
    case $failure in Yes | yes | 1) problems="$problems GPU $bus: row remapping failed;" ;; esac
  done <<<"$rows"
fi
if kernel=$(dmesg --since "-${WINDOW_MIN}min" 2>/dev/null); then
  # 48 double-bit ECC, 63/64 row remapping, 74 NVLink, 79 fallen off the bus, 92-95 ECC,
  # 119/120 GSP.
  # One entry per code and GPU: "Xid 79 on PCI:0000:3b:00 x2".
  xids=$(printf '%s\n' "$kernel" | sed -nE 's/.*NVRM: Xid \(([^)]*)\): (48|63|64|74|79|92|94|95|119|120),.*/\2 on \1/p' |
    sort | uniq -c | awk '{n = $1; $1 = ""; printf "%sXid%s x%d", sep, $0, n; sep = ", "}')
  [ -z "$xids" ] || problems="$problems $xids;"
else
  note=" (the kernel log is not readable here: Xid not checked)"
fi
if [ -n "$problems" ]; then
  echo "$problems"
  exit 1
fi
echo "no uncorrected ECC error, no pending or failed row remap, no Xid$note"
