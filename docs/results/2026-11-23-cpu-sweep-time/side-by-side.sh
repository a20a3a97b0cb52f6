#!/usr/bin/env bash
# Issue 13 CPU evidence: the README sweep with 5 trials, today's code (1852b31) then this branch's, one after the other.
set -uo pipefail
. .venv/bin/activate
for label in before after; do
  tree=<checkout at 1852b31>; [ $label = after ] && tree=<checkout at 55d6218>
  rm -rf /tmp/cpu-$label
  echo "$label start $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  start=$(date +%s.%N)
  (cd $tree && PYTHONPATH=$tree python -m eaq.run -m precision=fp32,fp16,int8 trial=1,2,3,4,5 paths.output_dir=/tmp/cpu-$label > /tmp/cpu-$label.log 2>&1)
  end=$(date +%s.%N)
  echo "$label end $(date -u +%H:%M:%S) wall $(python -c "print(round($end - $start, 1))") s load $(cut -d' ' -f1-3 /proc/loadavg)"
done
